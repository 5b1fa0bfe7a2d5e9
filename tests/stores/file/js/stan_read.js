// Subscribe with the real node-nats-streaming client and print what was delivered.
//
// argv[2] is a JSON job: {url, cluster, client, subs: [{key, channel, durable, queue,
// all, startSeq, maxInFlight, ackWaitMs, ack}], expect: {key: count}, idleMs, timeoutMs}.
// Prints {key: [[seq, subject, reply, dataBase64, timestamp, redelivered], ...]} as JSON,
// then closes the connection (durables stay).
'use strict'
const stan = require('node-nats-streaming')

const job = JSON.parse(process.argv[2])
const got = {}
const sc = stan.connect(job.cluster, job.client, { url: job.url, connectTimeout: 5000 })
let finished = false

function done (code) {
  if (finished) return
  finished = true
  process.stdout.write(JSON.stringify(got) + '\n')
  sc.close()
  setTimeout(() => process.exit(code), 500)
}

function complete () {
  return Object.entries(job.expect || {}).every(([key, n]) => (got[key] || []).length >= n)
}

let idleTimer = null
function check () {
  if (!complete()) return
  if (idleTimer) clearTimeout(idleTimer)
  idleTimer = setTimeout(() => done(0), job.idleMs || 300)
}

sc.on('error', (err) => {
  process.stderr.write('stan error: ' + err + '\n')
  done(2)
})

sc.on('connect', () => {
  for (const spec of job.subs) {
    got[spec.key] = []
    const opts = sc.subscriptionOptions().setManualAckMode(true)
    if (spec.all) opts.setDeliverAllAvailable()
    if (spec.startSeq) opts.setStartAtSequence(spec.startSeq)
    if (spec.durable) opts.setDurableName(spec.durable)
    if (spec.maxInFlight) opts.setMaxInFlight(spec.maxInFlight)
    if (spec.ackWaitMs) opts.setAckWait(spec.ackWaitMs)
    const sub = spec.queue
      ? sc.subscribe(spec.channel, spec.queue, opts)
      : sc.subscribe(spec.channel, opts)
    sub.on('error', (err) => {
      process.stderr.write('subscription error: ' + err + '\n')
      done(3)
    })
    sub.on('message', (msg) => {
      got[spec.key].push([
        msg.getSequence(),
        msg.getSubject(),
        msg.msg.getReply(),
        msg.getRawData().toString('base64'),
        msg.getTimestampRaw(),
        msg.isRedelivered()
      ])
      if (spec.ack !== false) msg.ack()
      check()
    })
  }
  check()
  setTimeout(() => done(complete() ? 0 : 4), job.timeoutMs || 10000)
})
