// Live refresh: every data-refresh seconds, the page fetches itself and swaps in its new
// main content, unless paused (the header's button) or the tab is hidden.
(function () {
  "use strict";
  var seconds = parseInt(document.body.getAttribute("data-refresh") || "0", 10);
  var button = document.getElementById("refresh-toggle");
  if (!seconds || !button) {
    return;
  }
  var paused = false;
  button.addEventListener("click", function () {
    paused = !paused;
    button.textContent = paused ? "resume live refresh" : "pause live refresh";
  });
  function refresh() {
    if (paused || document.hidden) {
      return;
    }
    fetch(window.location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (!html || paused) {
          return;
        }
        var doc = new DOMParser().parseFromString(html, "text/html");
        var next = doc.getElementById("main");
        var main = document.getElementById("main");
        var active = document.activeElement;
        if (next && main && !(active && main.contains(active) && /INPUT|SELECT|TEXTAREA/.test(active.tagName))) {
          main.replaceChildren.apply(main, Array.prototype.slice.call(next.childNodes).map(function (n) {
            return document.importNode(n, true);
          }));
        }
      })
      .catch(function () {});
  }
  window.setInterval(refresh, seconds * 1000);
}());
