// A bare kafkajs group member for the kfake corpse reproduction: joins and
// idles until killed. `node corpse-member.js BROKER GROUP CLIENT_ID TOPIC`.
import { Kafka, logLevel } from 'kafkajs';

const [broker = '', group = '', clientId = '', topic = ''] = process.argv.slice(2);
const c = new Kafka({ clientId, brokers: [broker], logLevel: logLevel.NOTHING }).consumer({ groupId: group, sessionTimeout: 8000, rebalanceTimeout: 10000, heartbeatInterval: 500, maxWaitTimeInMs: 100 });
// Tell the test when a JoinGroup is on the wire, so it can kill us while
// the broker holds it (a fixed delay misses under load: node may take
// seconds to start).
c.on(c.events.REQUEST, (ev) => {
  if (ev.payload.apiName === 'JoinGroup') process.stdout.write('join-sent\n');
});
void (async () => {
  await c.connect();
  await c.subscribe({ topic, fromBeginning: true });
  await c.run({ eachMessage: async () => undefined });
})();
