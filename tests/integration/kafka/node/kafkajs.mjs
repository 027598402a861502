// kafkajs against gateway-kafka, one scenario per run, driven by test_kafkajs.py.
// Prints one JSON line: what was sent, what each member received and was assigned.
//   node kafkajs.mjs roundtrip --broker H:P --topic T --group G --partition N
//   node kafkajs.mjs group --broker H:P --topic T --group G --partitions N --count M --rounds R
import { AssignerProtocol, Kafka, logLevel } from "kafkajs";

const args = Object.fromEntries(
  process.argv.slice(3).map((v, i, a) => (i % 2 === 0 ? [v.replace(/^--/, ""), a[i + 1]] : null))
    .filter(Boolean));
const scenario = process.argv[2];
const timeoutMs = Number(args["timeout-ms"] ?? 60000);
const kafka = new Kafka({ clientId: "kafkajs-conformance", brokers: [args.broker],
                          logLevel: logLevel.WARN, retry: { retries: 5 } });
const b64 = (buf) => (buf === null || buf === undefined ? null : Buffer.from(buf).toString("base64"));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function consume(members, want, received) {
  const deadline = Date.now() + timeoutMs;
  while (Object.values(received).flat().length < want && Date.now() < deadline) await sleep(100);
}

async function member(name, received, assigned, joins = {}) {
  const consumer = kafka.consumer({ groupId: args.group, sessionTimeout: 10000,
                                    heartbeatInterval: 1000, rebalanceTimeout: 20000 });
  joins[name] = [];   // one entry per generation this member joined: its partitions
  consumer.on(consumer.events.GROUP_JOIN, (e) => {
    assigned[name] = (e.payload.memberAssignment[args.topic] ?? []).slice().sort();
    joins[name].push(assigned[name]);
  });
  await consumer.connect();
  await consumer.subscribe({ topic: args.topic, fromBeginning: true });
  received[name] = [];
  await consumer.run({
    autoCommitInterval: 200,
    eachMessage: async ({ partition, message }) => {
      received[name].push({ partition, offset: Number(message.offset), key: b64(message.key),
                            value: b64(message.value),
                            headers: Object.entries(message.headers ?? {})
                              .map(([k, v]) => [k, b64(v)]) });
    },
  });
  return consumer;
}

async function main() {
  const producer = kafka.producer({ allowAutoTopicCreation: false });
  await producer.connect();
  const result = { sent: [], received: {}, assigned: {} };
  if (scenario === "roundtrip") {
    const partition = Number(args.partition);
    const messages = [
      { key: "k-1", value: "plain", headers: { h: "1" } },
      { key: null, value: "no key" },
      { key: Buffer.from([0, 1, 2, 255]), value: Buffer.from([9, 8, 7]), headers: { bin: Buffer.from([0, 255]) } },
      { key: "k-empty", value: "" },
      { key: "k-null", value: null },
    ];
    const answers = await producer.send({ topic: args.topic, acks: -1,
      messages: messages.map((m) => ({ ...m, partition })) });
    result.sent = answers.map((a) => ({ partition: a.partition, baseOffset: Number(a.baseOffset) }));
    const consumer = await member("only", result.received, result.assigned);
    // the records sent here (the topic may hold others before them)
    const base = result.sent[0].baseOffset;
    const deadline = Date.now() + timeoutMs;
    while (result.received.only.filter((m) => m.partition === partition && m.offset >= base)
      .length < messages.length && Date.now() < deadline) await sleep(100);
    await consumer.disconnect();
  } else if (scenario === "group") {
    const partitions = Number(args.partitions), count = Number(args.count);
    const rounds = Number(args.rounds ?? 6);
    const messages = Array.from({ length: count }, (_, i) => ({
      key: `key-${i}`, value: `value-${i}`, partition: i % partitions }));
    const answers = await producer.send({ topic: args.topic, acks: -1, messages });
    result.sent = answers.map((a) => ({ partition: a.partition, baseOffset: Number(a.baseOffset) }));
    const joins = {};
    const first = await member("a", result.received, result.assigned, joins);
    const second = await member("b", result.received, result.assigned, joins);
    await consume(2, count, result.received);
    // let both members settle into one generation (disjoint, covering every partition)
    const settled = () => {
      const a = result.assigned.a ?? [], b = result.assigned.b ?? [];
      return a.length && b.length && !a.some((p) => b.includes(p)) &&
        a.length + b.length === partitions;
    };
    const deadline = Date.now() + timeoutMs;
    while (!settled() && Date.now() < deadline) await sleep(100);
    result.settled = settled() ? { a: result.assigned.a, b: result.assigned.b } : null;
    result.joins = { a: joins.a.length, b: joins.b.length };   // generations joined until then
    if (result.settled) {
      // steady consumption: `rounds` more records per partition, a round every half second,
      // each waited for until some member got it. A settled group must not rebalance
      // meanwhile: no member joins another generation (the test counts them).
      const got = (value) => Object.values(result.received).flat().some(
        (m) => m.value === b64(Buffer.from(value)));
      for (let round = 0; round < rounds; round++) {
        const batch = Array.from({ length: partitions }, (_, p) => ({
          key: `steady-${round}-${p}`, value: `steady-${round}-${p}`, partition: p }));
        await producer.send({ topic: args.topic, acks: -1, messages: batch });
        const until = Date.now() + timeoutMs;
        while (!batch.every((m) => got(m.value)) && Date.now() < until) await sleep(50);
        await sleep(500);   // pacing: the window spans the rounds, heartbeats and commits
      }
      // what the group is at the end of the window, before any member is stopped (a member
      // leaving rebalances the others: Kafka's rule, not what is judged here)
      result.steady = { joins: { a: joins.a.length, b: joins.b.length },
                        assigned: { a: result.assigned.a, b: result.assigned.b } };
      const admin = kafka.admin();
      await admin.connect();
      const [group] = (await admin.describeGroups([args.group])).groups;
      await admin.disconnect();
      result.steady.group = { state: group.state, members: group.members.map((m) =>
        (AssignerProtocol.MemberAssignment.decode(m.memberAssignment).assignment[args.topic]
          ?? []).slice().sort()).sort() };
    }
    await first.disconnect();
    await second.disconnect();
  } else {
    throw new Error(`unknown scenario ${scenario}`);
  }
  await producer.disconnect();
  const admin = kafka.admin();   // the brokers Metadata told this client (advertised addresses)
  await admin.connect();
  result.brokers = (await admin.describeCluster()).brokers.map((b) => `${b.host}:${b.port}`).sort();
  await admin.disconnect();
  console.log(JSON.stringify(result));
}

main().catch((e) => { console.error(e); process.exit(1); });
