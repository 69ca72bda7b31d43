/* Task page uploads: one request per file with its own progress bar, drag and drop, replace on a name
   clash, and removal without a page reload. Without script the same forms post normally. */
(function () {
  "use strict";
  if (!window.FormData || !window.XMLHttpRequest) { return; }

  function humanSize(bytes) {
    var units = ["bytes", "KB", "MB", "GB"], i = 0, n = bytes;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i += 1; }
    return (i ? n.toFixed(1) : String(n)) + " " + units[i];
  }

  // Keep the "before you can submit" list in step with the files on the page (the server checks again).
  function refreshChecklist() {
    var box = document.getElementById("submit-checklist");
    if (!box) { return; }
    var count = function (kind) {
      var body = tableFor(kind);
      return body ? body.querySelectorAll("tr[data-file-id]").length : 0;
    };
    var shareSaved = box.dataset.shareUrlSaved === "1";
    var done = { deliverable: count("deliverable") > 0, log: count("log") > 0,
                 log_or_link: count("log") > 0 || shareSaved };
    var allDone = true;
    Array.prototype.forEach.call(box.querySelectorAll("li[data-need]"), function (li) {
      if (li.dataset.need in done) { li.hidden = done[li.dataset.need]; }
      if (!li.hidden) { allDone = false; }
    });
    box.classList.toggle("is-complete", allDone);
  }

  function tableFor(kind) { return document.querySelector(".file-table[data-kind='" + kind + "'] tbody"); }

  function removeRowByName(kind, name) {
    var body = tableFor(kind);
    if (!body) { return; }
    Array.prototype.forEach.call(body.querySelectorAll("tr[data-name]"), function (row) {
      if (row.dataset.name === name) { row.parentNode.removeChild(row); }
    });
  }

  // A removed file takes its "uploaded" line and any "Replace" offer with it: they speak of a file now gone.
  function forgetProgress(kind, name) {
    var list = document.querySelector("form.js-upload[data-kind='" + kind + "'] .upload-progress");
    if (!list) { return; }
    Array.prototype.forEach.call(list.querySelectorAll("li"), function (li) {
      if (li.dataset.name === name) { li.parentNode.removeChild(li); }
    });
  }

  function emptyRow() {
    var row = document.createElement("tr");
    row.className = "empty-row";
    var cell = document.createElement("td");
    cell.colSpan = 3; cell.className = "muted"; cell.textContent = "No files yet.";
    row.appendChild(cell);
    return row;
  }

  function markExpected(name, uploaded) {
    Array.prototype.forEach.call(document.querySelectorAll(".expected-list li"), function (li) {
      var code = li.querySelector("code");
      if (code && code.textContent === name) {
        li.querySelector("[aria-hidden]").textContent = uploaded ? "✓" : "○";
        li.querySelector(".visually-hidden").textContent = uploaded ? "uploaded:" : "not uploaded yet:";
      }
    });
  }

  function addRow(kind, file) {
    var body = tableFor(kind);
    if (!body) { return; }
    var empty = body.querySelector(".empty-row");
    if (empty) { empty.parentNode.removeChild(empty); }
    removeRowByName(kind, file.name);
    var row = document.createElement("tr");
    row.dataset.fileId = file.id; row.dataset.name = file.name;
    var nameCell = document.createElement("td");
    var link = document.createElement("a");
    link.href = file.download_url; link.textContent = file.name;
    nameCell.appendChild(link);
    if (file.warning) {  // the file is not the agent's own session file: said, never refused
      var warning = document.createElement("p");
      warning.className = "file-warning"; warning.setAttribute("role", "note"); warning.textContent = file.warning;
      nameCell.appendChild(warning);
    } else if (file.recognised) {  // the agent's own session file, with what it holds (or that it is counted)
      var recognised = document.createElement("p");
      recognised.className = "file-recognised"; recognised.setAttribute("role", "note");
      recognised.textContent = file.recognised;
      nameCell.appendChild(recognised);
    }
    var sizeCell = document.createElement("td");
    sizeCell.textContent = file.size_label;
    var actionCell = document.createElement("td");
    var form = document.createElement("form");
    form.method = "get"; form.action = file.delete_url; form.className = "inline-form js-remove";
    var button = document.createElement("button");
    button.type = "submit"; button.className = "link-button"; button.textContent = "Remove";
    button.setAttribute("aria-label", "Remove " + file.name);
    form.appendChild(button);
    actionCell.appendChild(form);
    row.appendChild(nameCell); row.appendChild(sizeCell); row.appendChild(actionCell);
    body.appendChild(row);
    if (kind === "deliverable") { markExpected(file.name, true); }
    refreshChecklist();
  }

  function setupZone(form) {
    var kind = form.dataset.kind;
    var input = form.querySelector("input[type=file]");
    var area = form.querySelector(".drop-area");
    var list = form.querySelector(".upload-progress");
    var maxFile = parseInt(form.dataset.maxFile, 10) || 0;
    var allowed = (form.dataset.allowed || "").split(",").filter(Boolean).map(function (e) { return e.toLowerCase(); });
    var queue = [], busy = false;

    function entry(file) {
      var li = document.createElement("li");
      li.dataset.name = file.name;
      var name = document.createElement("span");
      name.textContent = file.name + " (" + humanSize(file.size) + ")";
      var bar = document.createElement("progress");
      bar.max = 100; bar.value = 0;
      bar.setAttribute("aria-label", "Upload progress of " + file.name);
      var state = document.createElement("span");
      state.textContent = "waiting";
      var message = document.createElement("p");
      message.className = "upload-message";
      li.appendChild(name); li.appendChild(bar); li.appendChild(state); li.appendChild(message);
      list.appendChild(li);
      return { li: li, bar: bar, state: state, message: message };
    }

    function fail(view, text) {
      // A rejected file shows no progress bar: a full bar would read as "uploaded".
      if (view.bar.parentNode) { view.bar.parentNode.removeChild(view.bar); }
      view.state.textContent = "not uploaded";
      view.state.className = "is-error";
      view.message.className = "upload-message is-error";
      view.message.textContent = text;
    }

    function send(job) {
      var view = job.view, file = job.file;
      if (maxFile && file.size > maxFile) {
        fail(view, "“" + file.name + "” is larger than the " + humanSize(maxFile) + " limit per file.");
        return next();
      }
      var dot = file.name.lastIndexOf(".");
      var ext = dot > 0 ? file.name.slice(dot + 1).toLowerCase() : "";
      if (allowed.length && allowed.indexOf(ext) < 0) {
        fail(view, "“" + file.name + "” is not an accepted type. Accepted: " + allowed.join(", ") + ".");
        return next();
      }
      if (job.replace && !view.bar.parentNode) { view.li.insertBefore(view.bar, view.state); }
      view.state.textContent = "uploading…";
      view.state.className = "";
      view.message.textContent = "";
      var data = new FormData();
      data.append("csrfmiddlewaretoken", window.workerCsrfToken());
      data.append("kind", kind);
      if (job.replace) { data.append("replace", "1"); }
      data.append("file", file, file.name);
      var xhr = new XMLHttpRequest();
      xhr.open("POST", form.action);
      xhr.setRequestHeader("Accept", "application/json");
      xhr.setRequestHeader("X-CSRFToken", window.workerCsrfToken());
      xhr.upload.addEventListener("progress", function (event) {
        if (event.lengthComputable) { view.bar.value = Math.round(100 * event.loaded / event.total); }
      });
      xhr.addEventListener("load", function () {
        var reply = {};
        try { reply = JSON.parse(xhr.responseText); } catch (e) { reply = {}; }
        if (xhr.status === 200 && reply.ok) {
          view.bar.value = 100;
          view.state.textContent = job.replace ? "replaced" : "uploaded";
          view.state.className = "is-done";
          (reply.files || []).forEach(function (f) { addRow(kind, f); view.li.dataset.name = f.name; });
        } else if (reply.duplicate) {
          fail(view, reply.error);
          if (reply.name) { view.li.dataset.name = reply.name; }
          var again = document.createElement("button");
          again.type = "button"; again.className = "button"; again.textContent = "Replace “" + reply.name + "”";
          again.addEventListener("click", function () {
            again.parentNode.removeChild(again);
            queue.push({ file: file, view: view, replace: true });
            if (!busy) { next(); }
          });
          view.message.appendChild(document.createTextNode(" "));
          view.message.appendChild(again);
        } else {
          fail(view, reply.error || ("The upload failed (" + xhr.status + "). Your other files are safe; please try again."));
        }
        next();
      });
      xhr.addEventListener("error", function () {
        fail(view, "The connection was interrupted. Your other files are safe; please try this one again.");
        next();
      });
      xhr.send(data);
    }

    function next() {
      var job = queue.shift();
      busy = !!job;
      if (job) { send(job); }
    }

    function enqueue(files) {
      Array.prototype.forEach.call(files, function (file) { queue.push({ file: file, view: entry(file), replace: false }); });
      if (!busy) { next(); }
    }

    input.addEventListener("change", function () { enqueue(input.files); input.value = ""; });
    form.addEventListener("submit", function (event) { event.preventDefault(); enqueue(input.files); input.value = ""; });
    ["dragenter", "dragover"].forEach(function (name) {
      area.addEventListener(name, function (event) { event.preventDefault(); area.classList.add("is-dragover"); });
    });
    ["dragleave", "drop"].forEach(function (name) {
      area.addEventListener(name, function (event) { event.preventDefault(); area.classList.remove("is-dragover"); });
    });
    area.addEventListener("drop", function (event) {
      if (event.dataTransfer && event.dataTransfer.files.length) { enqueue(event.dataTransfer.files); }
    });
  }

  Array.prototype.forEach.call(document.querySelectorAll("form.js-upload"), setupZone);

  // Removing a file: asked in its row (a removal cannot be undone), then answered in place without a reload.
  // Without script the same "Remove" opens the confirmation page.
  function tableStatus(kind, text) {
    var status = document.querySelector(".file-table-status[data-kind='" + kind + "']");
    if (status) { status.textContent = text; }
  }

  function removeConfirmed(form, row) {
    var kind = row.closest(".file-table").dataset.kind;
    var data = new FormData();
    data.append("confirm", "1");
    data.append("csrfmiddlewaretoken", window.workerCsrfToken());
    fetch(form.action, {
      method: "POST", credentials: "same-origin", body: data,
      headers: { "X-CSRFToken": window.workerCsrfToken(), "Accept": "application/json" }
    }).then(function (r) { return r.json().then(function (data) { return { status: r.status, data: data }; }); })
      .then(function (reply) {
        if (reply.data.ok) {
          if (kind === "deliverable") { markExpected(row.dataset.name, false); }
          forgetProgress(kind, row.dataset.name);
          var body = row.parentNode;
          body.removeChild(row);
          if (!body.querySelector("tr[data-file-id]")) { body.appendChild(emptyRow()); }
          refreshChecklist();
          tableStatus(kind, reply.data.message || "File removed.");
        } else {
          askAgain(form);
          tableStatus(kind, reply.data.error || "The file could not be removed.");
        }
      }).catch(function () { form.submit(); });
  }

  function askAgain(form) {
    var question = form.parentNode.querySelector(".remove-question");
    if (question) { question.parentNode.removeChild(question); }
    form.hidden = false;
    form.querySelector("button").focus();
  }

  function ask(form) {
    var row = form.closest("tr");
    var name = row.dataset.name;
    var question = document.createElement("span");
    question.className = "remove-question";
    question.appendChild(document.createTextNode("Remove “" + name + "”? This cannot be undone. "));
    var yes = document.createElement("button");
    yes.type = "button"; yes.className = "link-button danger-link"; yes.textContent = "Yes, remove";
    yes.setAttribute("aria-label", "Yes, remove " + name);
    var keep = document.createElement("button");
    keep.type = "button"; keep.className = "link-button"; keep.textContent = "Keep";
    keep.setAttribute("aria-label", "Keep " + name);
    yes.addEventListener("click", function () { yes.disabled = true; keep.disabled = true; removeConfirmed(form, row); });
    keep.addEventListener("click", function () { askAgain(form); });
    question.appendChild(yes); question.appendChild(document.createTextNode(" ")); question.appendChild(keep);
    form.hidden = true;
    form.parentNode.appendChild(question);
    keep.focus();
  }

  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!form.classList || !form.classList.contains("js-remove") || !window.fetch) { return; }
    event.preventDefault();
    ask(form);
  });
})();
