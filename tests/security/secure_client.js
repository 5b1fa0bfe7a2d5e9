'use strict'
// The real node-nats-streaming client (tests/js/node_modules) with TLS or auth options.
// Usage: node secure_client.js '<json>'  with url, cluster, and optional tls {ca, cert,
// key: file paths}, user, pass, token. Publishes m0..m2, receives them from the start,
// prints one JSON line: {"ok": true, "result": [...]} or {"ok": false, "error": "..."}.

const fs = require('fs')
const path = require('path')
const stan = require(path.join(__dirname, '..', 'js', 'node_modules', 'node-nats-streaming'))

const args = JSON.parse(process.argv[2])

function natsOptions () {
  const opts = { url: args.url, reconnect: false, maxReconnectAttempts: 0 }
  for (const key of ['user', 'pass', 'token']) if (args[key]) opts[key] = args[key]
  if (args.tls) {
    opts.tls = {}
    for (const key of ['ca', 'cert', 'key']) {
      if (args.tls[key]) opts.tls[key] = fs.readFileSync(args.tls[key])
    }
  }
  return opts
}

function connect () {
  return new Promise((resolve, reject) => {
    const sc = stan.connect(args.cluster, 'node-secure', natsOptions())
    sc.once('connect', () => resolve(sc))
    sc.once('error', (err) => reject(err instanceof Error ? err : new Error(String(err))))
    sc.once('close', () => reject(new Error('closed before connecting')))
  })
}

function publish (sc, data) {
  return new Promise((resolve, reject) => {
    sc.publish('secured', data, (err) => (err ? reject(new Error(String(err))) : resolve()))
  })
}

async function roundtrip () {
  const sc = await connect()
  for (let i = 0; i < 3; i++) await publish(sc, `m${i}`)
  const got = await new Promise((resolve, reject) => {
    const received = []
    const sub = sc.subscribe('secured', sc.subscriptionOptions().setDeliverAllAvailable())
    sub.on('message', (msg) => {
      received.push(msg.getData())
      if (received.length === 3) resolve(received)
    })
    sub.once('error', reject)
  })
  await new Promise((resolve) => { sc.once('close', resolve); sc.close() })
  return got
}

const timer = setTimeout(() => finish({ ok: false, error: 'timeout' }), 15000)

function finish (report) {
  clearTimeout(timer)
  process.stdout.write(JSON.stringify(report) + '\n')
  process.exit(0)
}

roundtrip().then(
  (result) => finish({ ok: true, result }),
  (err) => finish({ ok: false, error: String(err && err.message ? err.message : err) })
)
