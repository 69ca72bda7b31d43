// Small behaviours the templates ask for with data attributes, so no page needs inline handlers
// (the Content-Security-Policy forbids them).
document.addEventListener("change", (event) => {
  const field = event.target.closest("[data-autosubmit]");
  if (field && field.form) field.form.submit();
});
document.addEventListener("click", (event) => {
  const field = event.target.closest("[data-select-on-click]");
  if (field) field.select();
});
