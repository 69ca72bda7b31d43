/* Collaboration-log autosave: the share link and notes are saved while the worker types (debounced) and
   flushed when the page is hidden, so notes typed but never "saved" are not lost. Errors appear next to the
   field they concern; the notes show how many characters remain. A field the server refuses is kept by the
   server for correction (a reload shows it again), while the other field is saved: the status says which. */
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
    // The server's answer replaces the errors the page was rendered with: they spoke of earlier text.
    Array.prototype.forEach.call(field.parentNode.querySelectorAll(".errorlist:not([id$='-live-errors'])"),
      function (list) { list.remove(); });
    var box = document.getElementById(id);
    if (!messages || !messages.length) {
      if (box) { box.remove(); }
      field.removeAttribute("aria-invalid");
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

  // The "before you can submit" list follows what the server says is saved (it checks again on submit).
  function checklist(reply) {
    var box = document.getElementById("submit-checklist");
    if (!box) { return; }
    var linkSaved = !!reply.share_url_saved;
    box.dataset.shareUrlSaved = linkSaved ? "1" : "";
    var logs = document.querySelectorAll(".file-table[data-kind='log'] tr[data-file-id]").length;
    var link = box.querySelector("li[data-need='share_url']");
    if (link) { link.hidden = linkSaved; }
    var either = box.querySelector("li[data-need='log_or_link']");
    if (either) { either.hidden = linkSaved || logs > 0; }
    var pending = box.querySelector("li[data-need='log-form']");
    if (!pending && !reply.ok) {
      pending = document.createElement("li");
      pending.dataset.need = "log-form";
      var to = document.createElement("a");
      to.href = "#log"; to.textContent = "Correct the collaboration-log details";
      pending.appendChild(to);
      pending.appendChild(document.createTextNode(": they are not saved yet."));
      box.querySelector(".todo-list").appendChild(pending);
    }
    if (pending) { pending.hidden = !!reply.ok; }
    box.classList.toggle("is-complete", !box.querySelector("li[data-need]:not([hidden])"));
  }

  function refused(reply, errors) {
    var saved = reply.saved || [];
    var kept = " What you typed stays on this page, also if you reload it.";
    if (errors.notes && errors.share_url) { return "Not saved: the link and the notes need a correction." + kept; }
    if (errors.notes) {
      return (saved.indexOf("share_url") >= 0 && form.querySelector("[name=share_url]") ?
        "The link is saved; the notes are not saved yet: please shorten them." :
        "The notes are not saved yet: please shorten them.") + kept;
    }
    if (errors.share_url) { return "The notes are saved; the link is not saved yet: please correct it." + kept; }
    return reply.error || "Not saved; please check the fields above.";
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
      if ("share_url_saved" in reply) { checklist(reply); }
      status.classList.toggle("is-error", !reply.ok);
      if (reply.ok) {
        var t = new Date();
        status.textContent = "Saved (" + t.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" }) + ").";
      } else {
        status.textContent = refused(reply, errors);
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
  if (!status.dataset.unsaved) { status.textContent = "Saved automatically as you type."; }
  count();
})();
