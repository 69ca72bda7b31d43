/* Collaboration-log autosave: the share link and notes are saved while the worker types (debounced) and
   flushed when the page is hidden, so notes typed but never "saved" are not lost. Errors appear next to the
   field they concern; the notes show how many characters remain. */
(function () {
  "use strict";
  var form = document.getElementById("log-form");
  if (!form || !window.fetch) { return; }
  var status = document.getElementById("log-autosave-status");
  var notes = form.querySelector("textarea[name=notes]");
  var counter = document.getElementById("notes-count");
  var timer = null, dirty = false;

  function fieldError(name, messages) {
    var field = form.querySelector("[name=" + name + "]");
    if (!field) { return; }
    var id = name + "-live-errors";
    var box = document.getElementById(id);
    if (!messages || !messages.length) {
      if (box) { box.remove(); }
      if (!field.parentNode.querySelector(".errorlist:not([id$='-live-errors'])")) { field.removeAttribute("aria-invalid"); }
      return;
    }
    if (!box) {
      box = document.createElement("ul");
      box.className = "errorlist"; box.id = id; box.setAttribute("role", "alert");
      field.parentNode.appendChild(box);
    }
    box.textContent = "";
    messages.forEach(function (text) { var li = document.createElement("li"); li.textContent = text; box.appendChild(li); });
    field.setAttribute("aria-invalid", "true");
  }

  function count() {
    if (!notes || !counter) { return; }
    var max = parseInt(notes.dataset.maxLength || "0", 10);
    var left = max - notes.value.length;
    counter.textContent = left >= 0 ? left + " characters left." :
      (-left) + " characters over the limit of " + max + "; please shorten the notes.";
    counter.classList.toggle("over-limit", left < 0);
  }

  function body() {
    var data = new FormData(form);
    data.set("csrfmiddlewaretoken", window.workerCsrfToken());
    return data;
  }

  function save() {
    window.clearTimeout(timer);
    if (!dirty) { return; }
    dirty = false;
    status.textContent = "Saving…";
    fetch(form.action, {
      method: "POST", body: body(), credentials: "same-origin",
      headers: { "Accept": "application/json", "X-CSRFToken": window.workerCsrfToken() }
    }).then(function (r) { return r.json(); }).then(function (reply) {
      var errors = reply.errors || {};
      fieldError("share_url", errors.share_url);
      fieldError("notes", errors.notes);
      if (reply.ok) {
        var pending = document.querySelector("#submit-checklist li[data-need='log-form']");
        if (pending) {
          pending.hidden = true;
          var box = document.getElementById("submit-checklist");
          box.classList.toggle("is-complete", !box.querySelector("li[data-need]:not([hidden])"));
        }
        status.classList.remove("is-error");
        var t = new Date();
        status.textContent = "Saved (" + t.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" }) + ").";
      } else if (errors.notes) {
        status.textContent = "Not saved yet: the notes need a correction. What you typed stays on this page.";
      } else {
        status.textContent = reply.notes_saved ? "Notes saved; the link needs a correction." :
          (reply.error || "Not saved; please check the fields above.");
      }
    }).catch(function () {
      dirty = true;
      status.textContent = "Could not save just now (offline?). What you typed stays on this page.";
    });
  }

  form.addEventListener("input", function (event) {
    if (event.target === notes) { count(); }
    dirty = true;
    window.clearTimeout(timer);
    timer = window.setTimeout(save, 800);
  });
  document.addEventListener("visibilitychange", function () {
    if (document.visibilityState === "hidden" && dirty && navigator.sendBeacon) {
      navigator.sendBeacon(form.action, body());
      dirty = false;
    }
  });
  count();
})();
