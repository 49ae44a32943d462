// The traffic-record transport a worker test reads, picked as the node picks it: Redis under a prefix of the test's
// own when REDIS_URL is set, else in-process; every test starts with an empty one.
import { randomUUID } from 'node:crypto';
import type { Logger } from '../../src/shared/log.ts';
import { MemoryRecords } from '../../src/shared/records/memory.ts';
import { RedisRecords } from '../../src/shared/records/redis.ts';
import type { RecordSink, RecordSource } from '../../src/shared/records/types.ts';
import { deleteRedisPrefix } from './node.ts';

export type Records = RecordSink & RecordSource;

/** One transport at a time: `fresh()` closes and clears the one before it, `close()` the last one. */
export class TestRecords {
  private current: Records | undefined;
  private prefix = '';

  constructor(private readonly logger: Logger) {}

  async fresh(): Promise<Records> {
    await this.close();
    if (process.env.REDIS_URL) {
      this.prefix = `test:${randomUUID()}:`;
      this.current = new RedisRecords({ url: process.env.REDIS_URL, prefix: this.prefix, consumer: 'worker-test', logger: this.logger });
    } else this.current = new MemoryRecords();
    return this.current;
  }

  async close(): Promise<void> {
    await this.current?.close();
    if (this.prefix) await deleteRedisPrefix(process.env.REDIS_URL!, this.prefix);
    this.current = undefined;
    this.prefix = '';
  }
}
