// Suites that start whole clusters of processes (local cluster, faults) run once in CI: the embedded pass sets
// EDGE_TEST_SKIP_SLOW=1 and the PostgreSQL + Redis pass runs them. Anywhere else they run.

/** A skip reason for node:test's `skip` option while EDGE_TEST_SKIP_SLOW is set, else false (run). */
export function skipSlowSuite(): string | false {
  return process.env.EDGE_TEST_SKIP_SLOW === '1' ? 'EDGE_TEST_SKIP_SLOW=1: multi-process suites run in the other CI pass' : false;
}
