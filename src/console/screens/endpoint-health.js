// The endpoint's health tab: uptime over 24 hours, 7 and 30 days, the last probe, a latency chart (uPlot) of the
// recent probes with the same probes as a table, and the check's configuration (on/off, path, interval). Refreshed
// while the page is open. API: docs/api.md "Health checks", docs/health-checks.md.
import { html, useEffect, useRef, useState } from '../vendor/htm-preact.mjs';
import { api } from '../api.js';
import { ErrorMessage, Loading, formatTime, useAction, useApi } from '../ui.js';
import { CHECK_ROW, FORM_GRID, endpointApi, intOr } from './endpoint-common.js';

const POLL_MS = 3000;
const STATUS_CLASS = { healthy: 'ok', unhealthy: 'bad', error: 'bad', timeout: 'warn' };

function uptime(value) {
  return value === null || value === undefined ? '—' : `${Number(value).toFixed(2)} %`;
}

/** Latency of the recent probes, oldest first; drawn by uPlot (a global from index.html) into a div of its own. */
function LatencyChart({ checks }) {
  const box = useRef(null);
  const plot = useRef(null);
  const points = [...checks].reverse();
  const data = [points.map((c) => Date.parse(c.checked_at) / 1000), points.map((c) => (c.latency_ms === null || c.latency_ms === undefined ? null : c.latency_ms))];
  useEffect(() => {
    if (!box.current || !window.uPlot) return undefined;
    const width = Math.max(320, Math.min(box.current.clientWidth || 800, 1100));
    plot.current = new window.uPlot(
      {
        width,
        height: 220,
        legend: { show: false },
        cursor: { show: true, drag: { x: false, y: false } },
        // One probe alone would stretch the time axis over years: give it a minute either side.
        scales: { x: { time: true, range: (_u, min, max) => (min === max ? [min - 60, max + 60] : [min, max]) } },
        axes: [{}, { label: 'ms', size: 60 }],
        series: [{}, { label: 'Latency (ms)', stroke: '#0b5cad', width: 2, points: { show: true, size: 5 } }],
      },
      data,
      box.current,
    );
    return () => {
      plot.current?.destroy();
      plot.current = null;
    };
  }, []);
  useEffect(() => {
    plot.current?.setData(data);
  }, [checks]);
  if (!window.uPlot) return html`<p class="hint">The chart library did not load; the probes are listed below.</p>`;
  const latest = points.at(-1);
  return html`<figure>
    <div ref=${box} class="chart" role="img" aria-label=${`Latency of the last ${points.length} probes${latest ? `, latest ${latest.latency_ms ?? '—'} ms` : ''}`}></div>
    <figcaption class="hint">Latency of the last ${points.length} probes, oldest on the left.</figcaption>
  </figure>`;
}

function CheckConfig({ endpoint, config, onSaved }) {
  const [enabled, setEnabled] = useState(!!config.enabled);
  const [path, setPath] = useState(config.path ?? '/');
  const [interval, setInterval_] = useState(String(config.interval_seconds ?? 60));
  const [saved, setSaved] = useState(false);
  const action = useAction();
  const submit = async (event) => {
    event.preventDefault();
    setSaved(false);
    const next = await action.run(() => api('PUT', endpointApi(endpoint.uuid, 'health-check'), { enabled, path: path.trim(), interval_seconds: intOr(interval, 60) }));
    if (next) {
      setSaved(true);
      onSaved(next);
    }
  };
  return html`<section aria-labelledby="health-config-heading">
    <h2 id="health-config-heading">Health check</h2>
    ${config.supported ? null : html`<p class="warning">This endpoint serves only TCP/UDP: HTTP health checks do not apply.</p>`}
    <p>Checks are <strong>${config.enabled ? 'on' : 'off'}</strong>${config.enabled ? html`: <code>GET ${config.path}</code> every ${config.interval_seconds} s` : ''}. Changes reach the prober within about 30 seconds.</p>
    <form onSubmit=${submit}>
      <div style=${FORM_GRID}>
        <div style=${CHECK_ROW}><input id="health-enabled" type="checkbox" checked=${enabled} onChange=${(e) => setEnabled(e.currentTarget.checked)} /> <label for="health-enabled">Probe this endpoint</label></div>
        <label for="health-path">Path</label>
        <input id="health-path" value=${path} onInput=${(e) => setPath(e.currentTarget.value)} autocomplete="off" />
        <label for="health-interval">Interval (seconds, ${config.min_interval_seconds}–${config.max_interval_seconds})</label>
        <input id="health-interval" type="number" min=${config.min_interval_seconds} max=${config.max_interval_seconds} value=${interval} onInput=${(e) => setInterval_(e.currentTarget.value)} />
      </div>
      <button type="submit" disabled=${action.busy}>Save health check</button>
      ${saved ? html` <span role="status">Saved.</span>` : null}
    </form>
    <${ErrorMessage} error=${action.error} />
  </section>`;
}

export function HealthTab({ endpoint }) {
  const health = useApi(endpointApi(endpoint.uuid, 'health'), { pollMs: POLL_MS });
  const config = useApi(endpointApi(endpoint.uuid, 'health-check'));
  const [current, setCurrent] = useState(null);
  useEffect(() => setCurrent(config.data), [config.data]);
  const h = health.data;
  return html`<div>
    <section aria-labelledby="health-status-heading">
      <h2 id="health-status-heading">Status</h2>
      <${ErrorMessage} error=${health.error} />
      ${!h && !health.error ? html`<${Loading} what="Loading the health status" />` : null}
      ${h
        ? html`<dl class="facts">
            <dt>Uptime 24 h</dt><dd>${uptime(h.uptime_24h)}</dd>
            <dt>Uptime 7 d</dt><dd>${uptime(h.uptime_7d)}</dd>
            <dt>Uptime 30 d</dt><dd>${uptime(h.uptime_30d)}</dd>
            <dt>Average latency</dt><dd>${h.avg_latency_ms ? `${Math.round(h.avg_latency_ms)} ms` : '—'}</dd>
            <dt>Agent connected</dt><dd>${h.has_active_agent ? 'yes' : 'no'}</dd>
            <dt>Last check</dt>
            <dd>${h.last_check
              ? html`<span class=${`badge ${STATUS_CLASS[h.last_check.status] ?? ''}`}>${h.last_check.status}</span> ${h.last_check.status_code ?? ''} · ${h.last_check.latency_ms} ms · ${formatTime(h.last_check.checked_at)}${h.last_check.error_message ? ` · ${h.last_check.error_message}` : ''}`
              : 'none yet'}</dd>
          </dl>`
        : null}
      ${h && h.recent_checks.length > 0
        ? html`<h3>Recent checks</h3>
            <${LatencyChart} checks=${h.recent_checks} />
            <details>
              <summary>The ${h.recent_checks.length} recent probes as a table</summary>
              <table>
                <caption class="visually-hidden">Recent probes, newest first</caption>
                <thead><tr><th scope="col">Checked</th><th scope="col">Status</th><th scope="col" class="num">HTTP</th><th scope="col" class="num">Latency (ms)</th><th scope="col">Error</th></tr></thead>
                <tbody>
                  ${h.recent_checks.map(
                    (c) => html`<tr key=${c.id}>
                      <td>${formatTime(c.checked_at)}</td>
                      <td><span class=${`badge ${STATUS_CLASS[c.status] ?? ''}`}>${c.status}</span></td>
                      <td class="num">${c.status_code ?? '—'}</td>
                      <td class="num">${c.latency_ms ?? '—'}</td>
                      <td>${c.error_message || '—'}</td>
                    </tr>`,
                  )}
                </tbody>
              </table>
            </details>`
        : null}
    </section>
    <${ErrorMessage} error=${config.error} />
    ${current ? html`<${CheckConfig} endpoint=${endpoint} config=${current} onSaved=${(next) => { setCurrent(next); health.reload(); }} />` : null}
  </div>`;
}
