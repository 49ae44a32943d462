// Process metrics (prom-client's defaults) under a role's prefix, so that `promtool check metrics` is clean: the
// edge's, the control API's and the worker's registries all collect them through here.
import { collectDefaultMetrics, type Registry } from 'prom-client';

/**
 * prom-client adds three gauges with a `_total` suffix, which Prometheus keeps for counters (promtool: "non-counter
 * metrics should not have _total suffix"). Each is the sum over `type` of the gauge of the same name without the
 * suffix (nodejs_active_handles{type}, …), which stays: `sum()` gives the same figure, so they are left out.
 */
const TOTAL_GAUGES = ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total'];

/** prom-client's process and Node.js metrics in `register`, every name starting with `prefix`. */
export function collectProcessMetrics(register: Registry, prefix: string): void {
  collectDefaultMetrics({ register, prefix });
  for (const name of TOTAL_GAUGES) register.removeSingleMetric(`${prefix}${name}`);
}
