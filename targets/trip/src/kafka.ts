// The kafkajs client every process uses, tuned like the reference's kgo
// options: short connection and request timeouts and quick retries, so a
// restored link or a restarted broker is used again within a fraction of a
// second instead of after kafkajs's default multi-second backoff.

import { Kafka, logLevel, type LogEntry } from 'kafkajs';
import type { Logger } from './log';

export function newKafka(brokers: string, clientId: string, log: Logger): Kafka {
  return new Kafka({
    clientId,
    brokers: brokers.split(',').map((b) => b.trim()).filter((b) => b !== ''),
    connectionTimeout: 2000,
    requestTimeout: 5000,
    // kafkajs retries each request with exponential backoff; keep the first
    // waits short (restarts and link cuts are the normal case here) and the
    // total bounded, since every caller retries on its own loop anyway.
    retry: { initialRetryTime: 50, maxRetryTime: 1000, retries: 8, factor: 0.2, multiplier: 2 },
    logLevel: logLevel.WARN,
    logCreator: () => (entry: LogEntry) => {
      const { message, ...rest } = entry.log;
      const attrs = { kafkajs: entry.namespace, ...rest };
      if (entry.level <= logLevel.ERROR) log.warn(`kafkajs: ${message}`, attrs);
      else if (entry.level === logLevel.WARN) log.info(`kafkajs: ${message}`, attrs);
      else log.debug(`kafkajs: ${message}`, attrs);
    },
  });
}
