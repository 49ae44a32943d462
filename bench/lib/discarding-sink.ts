// A record sink for benches that keeps nothing: the shipper and rule statistics do their per-request work, and
// the records go nowhere, so what is measured is the edge's side alone.
import type { RecordSink, TrafficRecord } from '../../src/shared/records/types.ts';

export class DiscardingSink implements RecordSink {
  private sent = 0;
  append(records: readonly TrafficRecord[]): void {
    this.sent += records.length;
  }
  async flush(): Promise<void> {}
  stats() {
    return { buffered: 0, dropped: 0, sent: this.sent };
  }
  async close(): Promise<void> {}
}
