// Words and numbers for alert rules and events, shared by the alert screens: what a metric means, its value in the
// unit it is measured in, a rule's condition as a sentence, a status as a badge.
import { html } from '../vendor/htm-preact.mjs';
import { formatPercent } from '../ui.js';

export const METRICS = [
  ['error_rate', 'Error rate (5xx share of requests)'],
  ['errors_5xx', '5xx answers (count)'],
  ['requests', 'Requests (count)'],
  ['latency_p95_ms', 'Latency p95 (ms)'],
  ['endpoint_down', 'Endpoints down (health checks)'],
];

export const WINDOWS = [
  [60, '1 minute'],
  [300, '5 minutes'],
  [900, '15 minutes'],
  [3600, '1 hour'],
  [21600, '6 hours'],
  [86400, '24 hours'],
];

export function metricLabel(metric) {
  return METRICS.find(([m]) => m === metric)?.[1] ?? metric;
}

export function windowLabel(seconds) {
  const known = WINDOWS.find(([s]) => s === seconds);
  if (known) return known[1];
  return seconds % 60 === 0 ? `${seconds / 60} minutes` : `${seconds} s`;
}

/** A metric's value in its unit: a share as a percentage, latency in ms, counts as they are. */
export function metricValue(metric, value) {
  if (value === null || value === undefined) return '—';
  if (metric === 'error_rate') return formatPercent(value);
  if (metric === 'latency_p95_ms') return `${value} ms`;
  return String(value);
}

export function condition(rule) {
  const over = rule.metric === 'endpoint_down' ? '' : ` over ${windowLabel(rule.window_seconds)}`;
  return `${metricLabel(rule.metric)} ${rule.comparison === 'lt' ? 'below' : 'above'} ${metricValue(rule.metric, rule.threshold)}${over}`;
}

const STATUS_CLASS = { ok: 'ok', firing: 'bad', test: 'warn', unknown: '' };

export function AlertStatus({ status }) {
  return html`<span class=${`badge ${STATUS_CLASS[status] ?? ''}`}>${status}</span>`;
}

export function channelText(channel) {
  if (channel.type === 'email') return `E-mail to ${channel.to}`;
  return `Webhook ${channel.url}${channel.has_secret ? ' (signed)' : ''}`;
}
