// Small progressive enhancements; every page works without this file.
(function () {
  "use strict";
  document.querySelectorAll("select[data-autosubmit]").forEach(function (select) {
    select.addEventListener("change", function () { select.form.submit(); });
  });
  document.querySelectorAll("tr.trace-row[data-href]").forEach(function (row) {
    row.addEventListener("click", function (event) {
      if (event.target.closest("a")) { return; }
      window.location.href = row.dataset.href;
    });
  });
  function toggle(row) {
    var detail = document.getElementById(row.getAttribute("aria-controls"));
    if (!detail) { return; }
    detail.hidden = !detail.hidden;
    row.setAttribute("aria-expanded", String(!detail.hidden));
  }
  document.querySelectorAll(".wf-row[data-span-id]").forEach(function (row) {
    row.addEventListener("click", function () { toggle(row); });
    row.addEventListener("keydown", function (event) {
      if (event.key === "Enter" || event.key === " ") { event.preventDefault(); toggle(row); }
    });
  });
  var wanted = window.location.hash.replace("#span-", "");
  if (wanted) {
    var target = document.querySelector('.wf-row[data-span-id="' + wanted + '"]');
    if (target) { toggle(target); target.scrollIntoView({ block: "center" }); }
  }
})();
