// Grading page: the shared draft autosave (expert-autosave.js), and a request for feedback on every fail.
(function () {
  "use strict";
  const form = document.getElementById("grade-form");
  if (!form) return;

  function payload() {
    const verdicts = {};
    form.querySelectorAll("fieldset.criterion").forEach((box) => {
      const id = box.dataset.criterion;
      const checked = box.querySelector(`input[name=verdict_${id}]:checked`);
      verdicts[id] = { verdict: checked ? checked.value : "", feedback: box.querySelector("textarea").value };
    });
    const overall = form.querySelector("input[name=overall]:checked");
    return {
      verdicts,
      overall: overall ? overall.value : "",
      feedback: form.querySelector("textarea[name=feedback]").value,
    };
  }

  function checkFeedback(box) {
    const failed = box.querySelector("input[type=radio][value=fail]:checked");
    const empty = box.querySelector("textarea").value.trim() === "";
    let note = box.querySelector(".feedback-needed");
    const needs = Boolean(failed) && empty;
    box.classList.toggle("needs-feedback", needs);
    if (needs && !note) {
      note = document.createElement("p");
      note.className = "feedback-needed";
      note.textContent = "Feedback is required when a criterion fails: say what is wrong.";
      box.appendChild(note);
    } else if (!needs && note) {
      note.remove();
    }
  }

  window.expertAutosave(form, payload, (event) => {
    const box = event.target.closest("fieldset.criterion");
    if (box) checkFeedback(box);
  });
  form.querySelectorAll("fieldset.criterion").forEach(checkFeedback);
})();
