// The edge's internal operations port (EDGE_OPS_PORT, loopback by default): the shared ops server with the edge's
// metrics and its synchronous readiness checks, which read the edge's own state and never wait on Redis or control.
import { OpsServer as SharedOpsServer } from '../shared/ops-server.ts';
import type { Logger } from '../shared/log.ts';
import type { EdgeMetrics } from './metrics.ts';

export interface OpsServerOptions {
  metrics: EdgeMetrics;
  /** Readiness checks by name, each true while that part of the edge is ready; /readyz answers 200 only when all hold. */
  readiness: Record<string, () => boolean>;
  logger: Logger;
}

export class OpsServer extends SharedOpsServer {
  constructor(options: OpsServerOptions) {
    super({ ...options, component: 'edge-ops' });
  }
}
