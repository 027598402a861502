// One conformance scenario of the official RocketMQ 5 Node.js client against gateway-grpc.
//
//   node conformance.mjs <scenario> --endpoint 127.0.0.1:8081 --topic T [--group G] [--timeout-ms 40000]
//
// Prints one JSON line: {scenario, sent, received, acked, errors, corrupted, ...} for
// tests/integration/rocketmq/test_node_client.py to assert on. Every wait polls against a deadline.
import { createRequire } from 'node:module';
import { parseArgs } from 'node:util';

const require = createRequire(import.meta.url);
const { Producer, SimpleConsumer, PushConsumer, FilterExpression, ConsumeResult } =
  require('rocketmq-client-nodejs');
const { FilterType, TransactionResolution } =
  require('rocketmq-client-nodejs/proto/apache/rocketmq/v2/definition_pb');

const { positionals: [scenario], values: opts } = parseArgs({
  allowPositionals: true,
  options: {
    endpoint: { type: 'string' },
    topic: { type: 'string' },
    group: { type: 'string', default: 'node-conformance' },
    'timeout-ms': { type: 'string', default: '40000' },
  },
});
const deadline = Date.now() + Number(opts['timeout-ms']);
const result = { scenario, sent: [], received: [], acked: [], errors: [], corrupted: [] };
const clients = [];
let pushed;   // the push consumer, whose retry policy (from the Telemetry settings) is reported

// The client's log: warnings to stderr; a discarded "corrupted" message is recorded (it fails a test).
const logger = {
  info() {},
  debug() {},
  warn: (...args) => log('warn', args),
  error: (...args) => log('error', args),
};
function log(level, [format, ...args]) {
  const line = String(format).replace(/%[sdoj]/g, () => String(args.shift()));
  if (/corrupt/i.test(line)) result.corrupted.push(line);
  process.stderr.write(`[${level}] ${line}\n`);
}

const base = { endpoints: opts.endpoint, namespace: '', requestTimeout: 10000, logger };

function view(message) {
  return {
    body: message.body.toString(),
    messageId: message.messageId,
    tag: message.tag ?? null,
    keys: message.keys,
    group: message.messageGroup ?? null,
    properties: Object.fromEntries(message.properties),
    deliveryAttempt: message.deliveryAttempt,
    deliveryTimestamp: message.deliveryTimestamp?.getTime() ?? null,
    corrupted: Boolean(message.corrupted),
    receivedAt: Date.now(),
  };
}

function failure(op, err) {
  return { op, name: err?.constructor?.name ?? 'Error', code: err?.code ?? null,
    message: String(err?.message ?? err) };
}

async function until(predicate, what) {
  while (!(await predicate())) {
    if (Date.now() > deadline) throw Object.assign(new Error(`timed out: ${what}`), { code: 'TIMEOUT' });
    await new Promise(resolve => setTimeout(resolve, 50));
  }
}

async function started(client) {
  await client.startup();   // one that failed to start is not shut down (process.exit ends it)
  clients.push(client);
  return client;
}

function producer(extra = {}) {
  return started(new Producer({ ...base, topics: [opts.topic], ...extra }));
}

function simpleConsumer(expression = '*') {
  return started(new SimpleConsumer({
    ...base, consumerGroup: opts.group, awaitDuration: 5000,
    subscriptions: new Map([[opts.topic, expression]]),
  }));
}

async function pushConsumer(consume) {
  const consumer = await started(new PushConsumer({
    ...base, consumerGroup: opts.group, longPollingTimeout: 5000,
    subscriptions: new Map([[opts.topic, '*']]),
    messageListener: { consume },
  }));
  pushed = consumer;
  // what the client's nacks and dead-letterings were answered (the RPCs themselves untouched)
  result.nacked = [];
  result.forwarded = [];
  observe(consumer, 'changeInvisibleDurationViaRpc', result.nacked);
  observe(consumer, 'forwardMessageToDeadLetterQueueViaRpc', result.forwarded);
  return consumer;
}

const millis = duration => duration.getSeconds() * 1000 + Math.floor(duration.getNanos() / 1e6);

function observe(consumer, method, codes) {
  const call = consumer[method].bind(consumer);
  consumer[method] = async (endpoints, request, timeout) => {
    const response = await call(endpoints, request, timeout);
    codes.push({ code: response.getStatus()?.getCode() ?? null,
      invisibleMs: request.getInvisibleDuration?.() ? millis(request.getInvisibleDuration()) : null });
    return response;
  };
}

async function send(client, message, transaction) {
  const receipt = await client.send({ topic: opts.topic, ...message }, transaction);
  result.sent.push({ body: message.body.toString(), messageId: receipt.messageId });
  return receipt;
}

// Receive until `want` messages came (acking each unless ack=false); returns them.
async function drain(consumer, want, { ack = true, invisibleMs = 15000 } = {}) {
  const got = [];
  await until(async () => {
    for (const message of await consumer.receive(32, invisibleMs)) {
      got.push(message);
      result.received.push(view(message));
      if (ack) {
        await consumer.ack(message);
        result.acked.push(message.body.toString());
      }
    }
    return got.length >= want;
  }, `${want} messages received`);
  return got;
}

const body = text => Buffer.from(text);

const scenarios = {
  async normal() {
    const p = await producer();
    const consumer = await simpleConsumer();
    for (let i = 0; i < 5; i++) {
      await send(p, { body: body(`n-${i}`), tag: 't', keys: [`k${i}`],
        properties: new Map([['shop', '7']]) });
    }
    await drain(consumer, 5);
  },

  async fifo() {
    const p = await producer();
    for (let i = 0; i < 6; i++) {
      for (const group of ['g1', 'g2', 'g3']) {
        await send(p, { body: body(`${group}:${i}`), messageGroup: group });
      }
    }
    await drain(await simpleConsumer(), 18);
  },

  async delay() {
    const p = await producer();
    const consumer = await simpleConsumer();
    result.deliverAt = Date.now() + 2000;
    await send(p, { body: body('later'), deliveryTimestamp: new Date(result.deliverAt) });
    await send(p, { body: body('now') });
    await drain(consumer, 2);
  },

  async transaction() {
    result.checked = [];
    const checker = {
      async check(message) {
        result.checked.push(view(message));
        return message.keys.includes('rollback') ? TransactionResolution.ROLLBACK
          : TransactionResolution.COMMIT;
      },
    };
    const p = await producer({ checker });
    const consumer = await simpleConsumer();
    const committed = p.beginTransaction();
    await send(p, { body: body('committed') }, committed);
    await committed.commit();
    const rolledBack = p.beginTransaction();
    await send(p, { body: body('rolled-back') }, rolledBack);
    await rolledBack.rollback();
    // left open: the broker checks back through the Telemetry stream; the checker decides
    await send(p, { body: body('checked'), keys: ['commit'] }, p.beginTransaction());
    await send(p, { body: body('checked-out'), keys: ['rollback'] }, p.beginTransaction());
    await drain(consumer, 2);
    await until(() => ['checked', 'checked-out'].every(
      b => result.checked.some(m => m.body === b)), 'both open transactions checked back');
    const last = p.beginTransaction();
    await send(p, { body: body('last') }, last);
    await last.commit();
    await drain(consumer, 1);
  },

  async simple() {   // tag filter, then invisible-duration changes
    const p = await producer();
    for (let i = 0; i < 6; i++) {
      await send(p, { body: body(`m-${i}`), tag: i % 2 === 0 ? 'even' : 'odd' });
    }
    const consumer = await simpleConsumer('even');
    const [kept, ...released] = await drain(consumer, 3, { ack: false });
    await consumer.changeInvisibleDuration(kept, 60000);   // hidden for a minute more
    for (const message of released) await consumer.changeInvisibleDuration(message, 1000);
    result.redelivered = (await drain(consumer, 2)).map(view);
    await consumer.ack(kept);   // with the handle changeInvisibleDuration returned
    result.acked.push(kept.body.toString());
  },

  async sql() {
    const p = await producer();
    for (let i = 0; i < 6; i++) {
      await send(p, { body: body(`s-${i}`), properties: new Map([['n', String(i)]]) });
    }
    await drain(await simpleConsumer(new FilterExpression('n > 3', FilterType.SQL)), 2);
  },

  async push() {   // concurrent; p-0 fails once and is redelivered
    await pushConsumer(async message => {
      result.received.push(view(message));
      return message.body.toString() === 'p-0' && message.deliveryAttempt === 1
        ? ConsumeResult.FAILURE : ConsumeResult.SUCCESS;
    });
    const p = await producer();
    for (let i = 0; i < 10; i++) await send(p, { body: body(`p-${i}`) });
    await until(() => new Set(result.received.map(m => m.body)).size === 10 &&
      result.received.filter(m => m.body === 'p-0').length === 2, 'ten consumed, p-0 twice');
  },

  async pushFifo() {   // an orderly group: each message group in send order
    await pushConsumer(async message => {
      result.received.push(view(message));
      return ConsumeResult.SUCCESS;
    });
    const p = await producer();
    for (let i = 0; i < 6; i++) {
      for (const group of ['g1', 'g2', 'g3']) {
        await send(p, { body: body(`${group}:${i}`), messageGroup: group });
      }
    }
    await until(() => result.received.length >= 18, '18 FIFO messages consumed');
  },

  async pushDlq() {   // an orderly group with retry_max_times 1: two attempts, then the DLQ
    await pushConsumer(async message => {
      result.received.push(view(message));
      return ConsumeResult.FAILURE;
    });
    const p = await producer();
    await send(p, { body: body('poison'), messageGroup: 'g' });
    await until(() => result.forwarded.length > 0, 'the poison message forwarded to the DLQ');
  },

  async badInput() {   // unknown topic, invalid topic name: the codes the client raises
    try {
      await producer({ topics: ['NodeNoSuchTopic'] });
    } catch (err) {
      result.errors.push(failure('startup:unknown-topic', err));
    }
    const p = await started(new Producer({ ...base }));
    for (const topic of ['NodeNoSuchTopic', 'bad topic!']) {
      try {
        await p.send({ topic, body: body('x') });
      } catch (err) {
        result.errors.push(failure(`send:${topic}`, err));
      }
    }
  },
};

// a client that hangs still gives its result: printed 15 s past the deadline at the latest
setTimeout(() => finish('watchdog'), deadline - Date.now() + 15000).unref();

function finish(why) {
  result.maxAttempts = pushed ? pushed.getRetryPolicy()?.getMaxAttempts() ?? null : undefined;
  if (why) result.errors.push({ op: why, name: 'Timeout', code: 'TIMEOUT', message: 'gave up' });
  process.stdout.write(`${JSON.stringify(result)}\n`);
  process.exit(0);
}

try {
  if (!scenarios[scenario]) throw new Error(`unknown scenario ${scenario}: ${Object.keys(scenarios)}`);
  await scenarios[scenario]();
} catch (err) {
  result.errors.push(failure('scenario', err));
}
for (const client of clients.reverse()) {
  await client.shutdown().catch(err => result.errors.push(failure('shutdown', err)));
}
finish();
