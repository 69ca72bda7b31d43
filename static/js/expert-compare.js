// Comparison page: autosave the ranking as a draft and count the time the page is visible.
(function () {
  "use strict";
  const form = document.getElementById("compare-form");
  if (!form) return;
  const statusBox = document.getElementById("autosave-status");
  const visibleInput = document.getElementById("id_visible_seconds");
  const csrf = form.querySelector("input[name=csrfmiddlewaretoken]").value;
  const url = form.dataset.autosaveUrl;
  let dirty = false, stopped = false, saving = false;
  let pendingSeconds = 0;                 // visible seconds not yet reported to the server
  let visibleSince = document.visibilityState === "visible" ? Date.now() : null;

  function flushVisible() {
    if (visibleSince !== null) {
      pendingSeconds += (Date.now() - visibleSince) / 1000;
      visibleSince = document.visibilityState === "visible" ? Date.now() : null;
    }
  }

  function payload() {
    const placements = {};
    form.querySelectorAll("fieldset.placement").forEach((box) => {
      const position = box.dataset.position;
      const checked = box.querySelector(`input[name=accept_${position}]:checked`);
      placements[position] = {
        rank: box.querySelector("select.rank").value,
        acceptability: checked ? checked.value : "",
      };
    });
    flushVisible();
    return {
      placements,
      justification: form.querySelector("textarea[name=justification]").value,
      visible_seconds: Math.round(pendingSeconds),
    };
  }

  function setStatus(text, isError) {
    statusBox.textContent = text;
    statusBox.classList.toggle("error", Boolean(isError));
  }

  function save(keepalive) {
    if (stopped || saving) return;
    const body = payload();
    const sent = body.visible_seconds;
    saving = true;
    dirty = false;
    fetch(url, {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrf },
      credentials: "same-origin",
      body: JSON.stringify(body),
      keepalive: Boolean(keepalive),
    }).then((response) => {
      saving = false;
      if (response.ok) {
        pendingSeconds = Math.max(0, pendingSeconds - sent);
        setStatus(`Saved at ${new Date().toLocaleTimeString()}.`, false);
        return;
      }
      dirty = true;
      if (response.status === 409) {
        stopped = true;
        response.json().then((d) => setStatus(`${d.error} Reload the page.`, true)).catch(() => {});
      } else {
        response.json().then((d) => setStatus(`${d.error} Your answers are still on this page.`, true))
          .catch(() => setStatus("Could not save just now; your answers are still on this page.", true));
      }
    }).catch(() => {
      saving = false;
      dirty = true;
      setStatus("Offline? Your answers are still on this page and will be saved when the connection returns.", true);
    });
  }

  function changed() {
    dirty = true;
    setStatus("Unsaved changes…", false);
  }
  form.addEventListener("input", changed);
  form.addEventListener("change", changed);
  form.addEventListener("submit", () => {
    flushVisible();
    visibleInput.value = String(Math.round(pendingSeconds));
    stopped = true;  // the form post saves everything; no autosave may race it
  });
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "hidden") {
      flushVisible();
      visibleSince = null;
      save(true);
    } else {
      visibleSince = Date.now();
    }
  });
  setInterval(() => {
    flushVisible();
    if (dirty || pendingSeconds >= 60) save(false);
  }, 8000);
})();
