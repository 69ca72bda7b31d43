// The expert workspace's draft autosave, shared by the grade, comparison and ToM-code pages: one place that counts
// the seconds the page is visible (reported with each save and with the final post), posts the draft as JSON and
// says plainly whether it was saved. A page calls expertAutosave(form, collect, onChange) with its own payload.
window.expertAutosave = function (form, collect, onChange) {
  "use strict";
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

  function setStatus(text, isError) {
    statusBox.textContent = text;
    statusBox.classList.toggle("error", Boolean(isError));
  }

  function refused(response) {
    dirty = true;
    if (response.status === 409) {       // submitted elsewhere or withdrawn: saving again cannot help
      stopped = true;
      response.json().then((d) => setStatus(`${d.error} Reload the page.`, true)).catch(() => {});
      return;
    }
    response.json().then((d) => setStatus(`${d.error} Your answers are still on this page.`, true))
      .catch(() => setStatus("Could not save just now; your answers are still on this page and will be retried.",
                             true));
  }

  function save(keepalive) {
    if (stopped || saving) return;
    flushVisible();
    const body = Object.assign(collect(), { visible_seconds: Math.round(pendingSeconds) });
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
      if (!response.ok) return refused(response);
      pendingSeconds = Math.max(0, pendingSeconds - sent);
      setStatus(`Saved at ${new Date().toLocaleTimeString()}.`, false);
    }).catch(() => {
      saving = false;
      dirty = true;
      setStatus("Offline? Your answers are still on this page and will be saved when the connection returns.", true);
    });
  }

  function changed(event) {
    dirty = true;
    setStatus("Unsaved changes…", false);
    if (onChange) onChange(event);
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
  form.dataset.autosave = "ready";  // changes from here on are saved (a browser test waits for this mark)
};
