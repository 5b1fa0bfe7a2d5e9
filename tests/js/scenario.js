'use strict'
// Runs one scenario with the real node-nats-streaming client against a stanpkg server.
// Usage: node scenario.js <name> '<json args>'   (args: url, cluster, plus per scenario)
// Prints one JSON object on stdout: the observations the Python test asserts on.

const stan = require('node-nats-streaming')

const [name, rawArgs] = process.argv.slice(2)
const args = JSON.parse(rawArgs || '{}')

function connect (clientID, extra) {
  return new Promise((resolve, reject) => {
    const sc = stan.connect(args.cluster, clientID, Object.assign({ url: args.url }, extra || {}))
    sc.once('connect', () => resolve(sc))
    sc.once('error', (err) => reject(err instanceof Error ? err : new Error(String(err))))
  })
}

function close (sc) {
  return new Promise((resolve) => {
    sc.once('close', () => resolve())
    sc.close()
  })
}

function publish (sc, subject, data) {
  return new Promise((resolve, reject) => {
    sc.publish(subject, data, (err, guid) => (err ? reject(new Error(String(err))) : resolve(guid)))
  })
}

function sleep (ms) {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

// Subscribes and collects messages; `ackIf(msg)` decides manual acks.
function subscribe (sc, subject, opts, queue, ackIf) {
  return new Promise((resolve, reject) => {
    const sub = queue ? sc.subscribe(subject, queue, opts) : sc.subscribe(subject, opts)
    sub.received = []
    sub.on('message', (msg) => {
      sub.received.push({
        seq: msg.getSequence(),
        data: msg.getData(),
        redelivered: msg.isRedelivered(),
        count: msg.getRedeliveryCount()
      })
      if (ackIf && ackIf(msg)) msg.ack()
    })
    sub.once('ready', () => resolve(sub))
    sub.once('error', (err) => reject(err instanceof Error ? err : new Error(String(err))))
  })
}

async function waitFor (sub, count, timeoutMs) {
  const deadline = Date.now() + (timeoutMs || 5000)
  while (sub.received.length < count && Date.now() < deadline) await sleep(10)
  return sub.received.slice()
}

function endSub (sub, how) {
  return new Promise((resolve, reject) => {
    sub.once(how === 'close' ? 'closed' : 'unsubscribed', () => resolve())
    sub.once('error', (err) => reject(err))
    if (how === 'close') sub.close()
    else sub.unsubscribe()
  })
}

const scenarios = {
  // Publish then subscribe with each start position.
  async startPositions () {
    const sc = await connect('starts')
    for (let i = 1; i <= 5; i++) await publish(sc, 'foo', `m${i}`)
    const out = {}
    const variants = {
      all: (o) => o.setDeliverAllAvailable(),
      last: (o) => o.setStartWithLastReceived(),
      seq3: (o) => o.setStartAtSequence(3),
      delta: (o) => o.setStartAtTimeDelta(60000),
      newOnly: (o) => o
    }
    for (const [key, set] of Object.entries(variants)) {
      const sub = await subscribe(sc, 'foo', set(sc.subscriptionOptions()))
      await sleep(150)
      out[key] = sub.received.map((m) => m.seq)
      await endSub(sub, 'unsubscribe')
    }
    await close(sc)
    return out
  },

  // Live publish/subscribe, async publishes, ordering.
  async pubsub () {
    const sc = await connect('pubsub')
    const sub = await subscribe(sc, 'live', sc.subscriptionOptions())
    const guids = await Promise.all(Array.from({ length: args.count }, (_, i) => publish(sc, 'live', `n${i}`)))
    const got = await waitFor(sub, args.count)
    await close(sc)
    return { guids: new Set(guids).size, seqs: got.map((m) => m.seq), data: got.map((m) => m.data) }
  },

  // Manual acks, ack wait and redelivery.
  async redelivery () {
    const sc = await connect('redeliver')
    const opts = sc.subscriptionOptions().setManualAckMode(true).setAckWait(1000)
    let seen = 0
    const sub = await subscribe(sc, 'rd', opts, null, () => ++seen >= 2)
    await publish(sc, 'rd', 'once')
    const got = await waitFor(sub, 2, 4000)
    await sleep(1300)
    await close(sc)
    return { first: got[0], second: got[1], total: sub.received.length }
  },

  // Max in flight with manual acks.
  async maxInflight () {
    const sc = await connect('inflight')
    const opts = sc.subscriptionOptions().setManualAckMode(true).setMaxInFlight(2)
    const held = []
    const sub = await subscribe(sc, 'mi', opts, null, (msg) => { held.push(msg); return false })
    for (let i = 0; i < 5; i++) await publish(sc, 'mi', `x${i}`)
    await sleep(300)
    const before = sub.received.length
    held[0].ack()
    await sleep(300)
    const after = sub.received.length
    await close(sc)
    return { before, after }
  },

  // Durable: partial acks, close, publish while offline, resume.
  async durable () {
    const sc = await connect('durable')
    const opts = () => sc.subscriptionOptions().setDurableName('dur').setManualAckMode(true)
      .setDeliverAllAvailable()
    const sub = await subscribe(sc, 'd', opts(), null, (msg) => msg.getSequence() <= 2)
    for (let i = 1; i <= 4; i++) await publish(sc, 'd', `d${i}`)
    await waitFor(sub, 4)
    await sleep(100)
    await endSub(sub, 'close')
    await publish(sc, 'd', 'd5')
    const again = await subscribe(sc, 'd', opts(), null, () => true)
    const resumed = await waitFor(again, 3)
    await endSub(again, 'unsubscribe')
    const fresh = await subscribe(sc, 'd', sc.subscriptionOptions().setDurableName('dur'))
    await sleep(200)
    const afterUnsub = fresh.received.length
    await close(sc)
    return { resumed, afterUnsub }
  },

  // Durable survives the connection: close the client, reconnect, resume.
  async durableAcrossConnections () {
    let sc = await connect('dconn')
    const opts = () => sc.subscriptionOptions().setDurableName('dd').setDeliverAllAvailable()
    const sub = await subscribe(sc, 'dc', opts())
    await publish(sc, 'dc', 'a')
    await waitFor(sub, 1)
    await close(sc)
    sc = await connect('dconn')
    await publish(sc, 'dc', 'b')
    const again = await subscribe(sc, 'dc', opts())
    const got = await waitFor(again, 1)
    await sleep(100)
    await close(sc)
    return { got: got.map((m) => m.data), total: again.received.length }
  },

  // Queue group members share the work; a leaving member's unacked messages move.
  async queue () {
    const a = await connect('qa')
    const b = await connect('qb')
    const subA = await subscribe(a, 'q', a.subscriptionOptions(), 'workers', () => true)
    const subB = await subscribe(b, 'q', b.subscriptionOptions(), 'workers', () => true)
    for (let i = 0; i < 20; i++) await publish(a, 'q', `w${i}`)
    await sleep(300)
    const shared = { a: subA.received.length, b: subB.received.length }
    // Member C holds messages unacked, then leaves: B gets them.
    const c = await connect('qc')
    await endSub(subA, 'unsubscribe')
    const subC = await subscribe(c, 'q', c.subscriptionOptions().setManualAckMode(true), 'workers')
    const bBefore = subB.received.length
    for (let i = 0; i < 6; i++) await publish(a, 'q', `v${i}`)
    await sleep(300)
    const held = subC.received.map((m) => m.seq)
    await close(c)
    await sleep(600)
    const moved = subB.received.slice(bBefore).filter((m) => m.redelivered).map((m) => m.seq)
    await close(a)
    await close(b)
    return { shared, held, moved }
  },

  // Errors the server reports to the client.
  async errors () {
    const sc = await connect('errs')
    const out = {}
    try {
      await connect('errs')
    } catch (err) {
      out.duplicate = err.message
    }
    await subscribe(sc, 'x', sc.subscriptionOptions().setDurableName('dup'))
    try {
      await subscribe(sc, 'x', sc.subscriptionOptions().setDurableName('dup'))
    } catch (err) {
      out.dupDurable = err.message
    }
    try {
      await subscribe(sc, 'x', sc.subscriptionOptions().setDurableName('a:b'), 'g')
    } catch (err) {
      out.durableQueueName = err.message
    }
    await publish(sc, 'casing', 'x')
    try {
      await publish(sc, 'Casing', 'x')
    } catch (err) {
      out.publish = err.message
    }
    await close(sc)
    return out
  },

  // Client PINGs keep a healthy connection alive; stays connected for a few intervals.
  async pings () {
    const sc = await connect('pinger', { stanPingInterval: 300, stanMaxPingOut: 3 })
    let lost = null
    sc.on('connection_lost', (err) => { lost = String(err) })
    await sleep(1200)
    await publish(sc, 'p', 'still here')
    await close(sc)
    return { lost }
  },

  // A client replaced by another connection learns it from its PINGs.
  async replacedByPing () {
    const old = await connect('replaced', { stanPingInterval: 300, stanMaxPingOut: 100 })
    let lost = null
    old.on('connection_lost', (err) => { lost = err instanceof Error ? err.message : String(err) })
    // Stop answering heartbeats: the old connection's NATS subscription goes away.
    old.nc.unsubscribe(old.hbSubscription)
    const fresh = await connect('replaced')
    await sleep(1000)
    await close(fresh)
    return { lost }
  }
}

async function main () {
  const scenario = scenarios[name]
  if (!scenario) throw new Error(`unknown scenario ${name}`)
  const result = await scenario()
  process.stdout.write(JSON.stringify({ ok: true, result }) + '\n')
  process.exit(0)
}

main().catch((err) => {
  process.stdout.write(JSON.stringify({ ok: false, error: err && err.message ? err.message : String(err) }) + '\n')
  process.exit(1)
})
