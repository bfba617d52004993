// Theme: the OS preference by default; the toggle's choice, kept in localStorage, wins.
(function () {
  var root = document.documentElement;
  var saved = null;
  try { saved = localStorage.getItem("console-theme"); } catch (e) { /* storage off */ }
  if (saved === "dark" || saved === "light") { root.dataset.theme = saved; }
  document.addEventListener("DOMContentLoaded", function () {
    var button = document.getElementById("theme-toggle");
    if (!button) { return; }
    button.addEventListener("click", function () {
      var dark = root.dataset.theme
        ? root.dataset.theme === "dark"
        : window.matchMedia("(prefers-color-scheme: dark)").matches;
      root.dataset.theme = dark ? "light" : "dark";
      try { localStorage.setItem("console-theme", root.dataset.theme); } catch (e) { /* storage off */ }
    });
  });
})();
