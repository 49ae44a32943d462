// Why a deployment step failed, in words the deployment's page shows (the `reason` of a `failed` status), and the
// marker for a step stopped because the deployment was cancelled (nothing to report as a failure).
import { MAX_REASON_LENGTH } from '../../shared/deploy.ts';

export class DeployError extends Error {
  override name = 'DeployError';
  constructor(reason: string) {
    super(reason.length > MAX_REASON_LENGTH ? `${reason.slice(0, MAX_REASON_LENGTH - 1)}…` : reason);
  }
}

export class Cancelled extends Error {
  override name = 'Cancelled';
}

/** Milliseconds as a person reads them: 500 ms, 1.5 s, 10 min. */
export function duration(ms: number): string {
  if (ms < 1000) return `${ms} ms`;
  if (ms % 60_000 === 0) return `${ms / 60_000} min`;
  return `${ms / 1000} s`;
}
