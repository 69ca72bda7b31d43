// Rubric editor: add/remove criterion rows, live count and category points, lint hints from the server.
(function () {
  "use strict";
  const form = document.getElementById("rubric-form");
  if (!form) return;
  const rowsBox = document.getElementById("criteria-rows");
  const template = document.getElementById("empty-row");
  const total = form.querySelector("input[name$='-TOTAL_FORMS']");
  const countBox = document.getElementById("criteria-count");
  const rubricHints = document.getElementById("rubric-hints");
  const totalsBox = document.getElementById("category-totals");
  const categories = JSON.parse(document.getElementById("rubric-categories").textContent);
  const csrf = form.querySelector("input[name=csrfmiddlewaretoken]").value;
  const MIN = 5, MAX = 20, MAX_ROWS = 40;
  let lintTimer = null, lintSeq = 0;

  function liveRows() {
    return Array.from(rowsBox.querySelectorAll("[data-row]")).filter((row) => !row.hidden);
  }
  function field(row, suffix) { return row.querySelector(`[name$='-${suffix}']`); }
  function used(row) {
    return field(row, "description").value.trim() !== "" || field(row, "label").value !== "";
  }

  function renumber() {
    liveRows().forEach((row, i) => { row.querySelector(".crit-num").textContent = String(i + 1); });
  }

  function updateCount() {
    const n = liveRows().filter(used).length;
    countBox.textContent = `${n} ${n === 1 ? "criterion" : "criteria"} (a rubric needs ${MIN}–${MAX})`;
    countBox.classList.toggle("bad", n < MIN || n > MAX);
  }

  function updateTotals() {
    const sums = {};
    categories.forEach((c) => { sums[c.code] = { given: 0, blanks: 0, rows: 0 }; });
    liveRows().filter(used).forEach((row) => {
      const code = field(row, "category").value;
      const raw = field(row, "points").value.trim();
      if (!sums[code]) return;
      sums[code].rows += 1;
      if (raw === "") sums[code].blanks += 1; else sums[code].given += Number(raw) || 0;
    });
    const lines = categories.map((c) => {
      const s = sums[c.code];
      let state, ok = true;
      if (s.rows === 0) { state = "no criteria yet"; ok = false; }
      else if (s.blanks > 0) {
        const left = c.points - s.given;
        ok = left > 0.01;
        state = ok ? `${s.given} given, ${s.blanks} blank get ${(left / s.blanks).toFixed(2)} each` : `${s.given} given: nothing left for blanks`;
      } else { ok = Math.abs(s.given - c.points) <= 0.01; state = `${s.given} given`; }
      return `<tr><td>${escapeText(c.name)}</td><td class="${ok ? "" : "off"}">${state} / ${c.points}</td></tr>`;
    });
    totalsBox.innerHTML = `<table><tbody>${lines.join("")}</tbody></table>`;
  }

  function escapeText(text) {
    const span = document.createElement("span");
    span.textContent = text;
    return span.innerHTML;
  }

  function showHints(hints) {
    const rows = liveRows();
    rows.forEach((row) => { row.querySelector(".lint-hints").innerHTML = ""; });
    rubricHints.innerHTML = "";
    hints.forEach((hint) => {
      const li = `<li class="hint-${hint.severity}">${escapeText(hint.message)}</li>`;
      if (hint.index === null || hint.index === undefined) rubricHints.insertAdjacentHTML("beforeend", li);
      else if (rows[hint.index]) rows[hint.index].querySelector(".lint-hints").insertAdjacentHTML("beforeend", li);
    });
  }

  function lint() {
    // Category and points travel too: the server answers with every rule submission enforces.
    const criteria = liveRows().map((row) => ({
      description: field(row, "description").value,
      label: field(row, "label").value,
      category: field(row, "category") ? field(row, "category").value : "",
      points: field(row, "points") ? field(row, "points").value : "",
    }));
    const sent = ++lintSeq;
    fetch(form.dataset.lintUrl, {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrf },
      credentials: "same-origin",
      body: JSON.stringify({ criteria }),
    }).then((r) => (r.ok ? r.json() : null)).then((data) => {
      if (sent !== lintSeq) return;  // a newer check is on its way
      if (data) showHints(data.hints);
      form.dataset.lint = "idle";
    }).catch(() => { if (sent === lintSeq) form.dataset.lint = "idle"; /* advice only; the server checks on submit */ });
  }

  function changed() {
    form.dataset.lint = "pending";
    lintSeq += 1;  // answers to checks already in flight are now stale
    updateCount();
    updateTotals();
    clearTimeout(lintTimer);
    lintTimer = setTimeout(lint, 450);
  }

  function enhanceRow(row) {
    const del = field(row, "DELETE");
    const box = row.querySelector(".crit-delete");
    if (del && box) {
      box.hidden = true;
      const button = document.createElement("button");
      button.type = "button";
      button.className = "link-button remove-row";
      button.textContent = "Remove";
      button.setAttribute("aria-label", "Remove this criterion");
      button.addEventListener("click", () => {
        del.checked = true;
        row.hidden = true;
        renumber();
        changed();
      });
      box.after(button);
    }
  }

  function addRow() {
    const index = Number(total.value);
    if (liveRows().length >= MAX_ROWS) return;
    const html = template.innerHTML.replace(/__prefix__/g, String(index));
    rowsBox.insertAdjacentHTML("beforeend", html);
    total.value = String(index + 1);
    const row = rowsBox.lastElementChild;
    enhanceRow(row);
    renumber();
    field(row, "description").focus();
    changed();
  }

  rowsBox.querySelectorAll("[data-row]").forEach(enhanceRow);
  document.getElementById("add-row").addEventListener("click", addRow);
  rowsBox.addEventListener("input", changed);
  rowsBox.addEventListener("change", changed);
  renumber();
  updateCount();
  updateTotals();
  lint();
})();
