// Form parts the endpoint's rule tabs (rate limits, routing) share between creating a rule and editing one: form
// state kept as typed, a list of condition rows to add to and remove from, and the Save / Cancel line with its error.
import { html, useEffect, useRef, useState } from '../vendor/htm-preact.mjs';
import { ErrorMessage } from '../ui.js';

let lastKey = 0;
/** A key for a new condition row, unique on the page (labels and inputs are paired by ids built from it). */
export function rowKey() {
  lastKey += 1;
  return `c${lastKey}`;
}

/**
 * A form's fields as typed: `[values, set, reset]`, where `set(name)` is the input handler of the field `name` (a
 * checkbox's checked state, any other control's value) and `reset(values)` starts over.
 */
export function useFields(initial) {
  const [values, setValues] = useState(initial);
  const set = (name) => (e) => {
    const input = e.currentTarget;
    const value = input.type === 'checkbox' ? input.checked : input.value;
    setValues((v) => ({ ...v, [name]: value }));
  };
  return [values, set, setValues];
}

/**
 * A fieldset of condition rows: each row drawn by `renderRow(row, index, update)` (update merges a patch into that
 * row), a "Remove condition N" button while more than `minRows` rows are left, and "Add condition", which appends
 * `blank()` (a row with a fresh `key`).
 */
export function ConditionList({ legend, rows, setRows, blank, minRows = 0, renderRow }) {
  const update = (i) => (patch) => setRows(rows.map((r, j) => (j === i ? { ...r, ...patch } : r)));
  return html`<fieldset>
    <legend>${legend}</legend>
    ${rows.map(
      (r, i) => html`<div class="toolbar" key=${r.key}>
        ${renderRow(r, i, update(i))}
        ${rows.length > minRows ? html`<button type="button" onClick=${() => setRows(rows.filter((_, j) => j !== i))}>Remove condition ${i + 1}</button>` : null}
      </div>`,
    )}
    <button type="button" onClick=${() => setRows([...rows, blank()])}>Add condition</button>
  </fieldset>`;
}

/** Focuses the element the returned ref is given to once, when it appears (the first field of a form just opened). */
export function useFocusOnOpen() {
  const ref = useRef(null);
  useEffect(() => {
    ref.current?.focus();
  }, []);
  return ref;
}

/**
 * Whether a row's editor is open: `open()`, `close()` (focus goes back to the button that opened it, given
 * `buttonRef`, rather than to the top of the page) and `editing`.
 */
export function useEditing() {
  const [editing, setEditing] = useState(false);
  const buttonRef = useRef(null);
  const returning = useRef(false);
  useEffect(() => {
    if (editing || !returning.current) return;
    returning.current = false;
    buttonRef.current?.focus();
  }, [editing]);
  const close = () => {
    returning.current = true;
    setEditing(false);
  };
  return { editing, open: () => setEditing(true), close, buttonRef };
}

/**
 * The end of a form: its submit button, Cancel when the form edits something (closing it without a write), and the
 * API's refusal, which leaves the form open with what was typed.
 */
export function FormActions({ submitLabel, busy, disabled, onCancel, error }) {
  return html`<div class="toolbar">
      <button type="submit" class="primary" disabled=${busy || disabled}>${submitLabel}</button>
      ${onCancel ? html`<button type="button" onClick=${onCancel}>Cancel</button>` : null}
    </div>
    <${ErrorMessage} error=${error} />`;
}
