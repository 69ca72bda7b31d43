/* Searchable O*NET occupation picker: results update while typing; without script the search form works. */
(function () {
  "use strict";
  var searchForm = document.querySelector(".occupation-search");
  var results = document.getElementById("occupation-results");
  if (!searchForm || !results || !window.fetch) { return; }
  var input = searchForm.querySelector("input[name=q]");
  var timer = null, lastQuery = null;

  function option(item, checked) {
    var wrap = document.createElement("div");
    wrap.className = "choice";
    var radio = document.createElement("input");
    radio.type = "radio"; radio.name = "occupation"; radio.value = String(item.id); radio.id = "occ-" + item.id;
    radio.checked = !!checked;
    var label = document.createElement("label");
    label.htmlFor = radio.id;
    label.appendChild(document.createTextNode(item.title + " "));
    var meta = document.createElement("span");
    meta.className = "muted";
    meta.textContent = item.soc_code + (item.sector ? " · " + item.sector : "");
    label.appendChild(meta);
    var total = parseInt(searchForm.dataset.tasksTotal || "0", 10);
    if (typeof item.reach === "number" && total && item.reach < total) {
      var note = document.createElement("span");
      note.className = "reach-note";
      note.textContent = " Only " + item.reach + " task" + (item.reach === 1 ? "" : "s") +
        " available for this occupation right now (this study asks for " + total +
        "); you are paid for each task you do.";
      label.appendChild(note);
    }
    wrap.appendChild(radio); wrap.appendChild(label);
    return wrap;
  }

  function render(items, query) {
    var checked = results.querySelector("input[name=occupation]:checked");
    var keep = checked ? checked.closest(".choice") : null;
    results.textContent = "";
    if (keep) { results.appendChild(keep); }
    items.forEach(function (item) {
      if (!checked || String(item.id) !== checked.value) { results.appendChild(option(item, false)); }
    });
    if (!items.length) {
      var p = document.createElement("p");
      p.className = "muted";
      var offered = searchForm.dataset.offeredCount;
      if (query) {
        p.className += " no-match";
        p.appendChild(document.createTextNode("No occupation in this study matches “" + query + "”. It covers " +
          offered + (offered === "1" ? " occupation" : " occupations") + ": try a more general word, or "));
        var link = document.createElement("a");
        link.href = "?browse=1#occupation-browse"; link.textContent = "browse them all";
        p.appendChild(link);
        p.appendChild(document.createTextNode(" and choose the closest."));
      } else {
        p.textContent = "Search above to see matching occupations.";
      }
      results.appendChild(p);
    }
  }

  function search() {
    var query = input.value.trim();
    if (query === lastQuery) { return; }
    lastQuery = query;
    if (!query) { render([], ""); return; }
    var url = searchForm.dataset.searchUrl;
    fetch(url + (url.indexOf("?") < 0 ? "?" : "&") + "q=" + encodeURIComponent(query), { credentials: "same-origin" })
      .then(function (r) { return r.json(); })
      .then(function (data) { if (query === lastQuery) { render(data.results || [], query); } })
      .catch(function () { /* keep the current list; the plain search button still works */ });
  }

  input.addEventListener("input", function () { window.clearTimeout(timer); timer = window.setTimeout(search, 250); });
  searchForm.addEventListener("submit", function (event) { event.preventDefault(); lastQuery = null; search(); });
})();
