// ctxplan report: hover values on the charts, and every section open when printed.
// Everything also works without this script: each mark has an SVG <title> (the browser's own
// tooltip), and the <details> sections open by a click.
(function () {
  "use strict";
  var tip = document.getElementById("tip");
  function place(ev) {
    var x = ev.clientX + 14, y = ev.clientY + 14;
    var w = tip.offsetWidth, h = tip.offsetHeight;
    if (x + w > window.innerWidth - 8) { x = ev.clientX - w - 14; }
    if (y + h > window.innerHeight - 8) { y = ev.clientY - h - 14; }
    tip.style.left = Math.max(4, x) + "px";
    tip.style.top = Math.max(4, y) + "px";
  }
  document.querySelectorAll("svg.chart [data-tip]").forEach(function (mark) {
    var title = mark.querySelector("title");
    mark.addEventListener("mouseenter", function (ev) {
      // The styled tooltip replaces the browser's own while the pointer is on the mark.
      if (title) { mark.removeChild(title); }
      tip.textContent = mark.getAttribute("data-tip");
      tip.hidden = false;
      mark.classList.add("hot");
      place(ev);
    });
    mark.addEventListener("mousemove", place);
    mark.addEventListener("mouseleave", function () {
      tip.hidden = true;
      mark.classList.remove("hot");
      if (title) { mark.appendChild(title); }
    });
  });
  window.addEventListener("beforeprint", function () {
    document.querySelectorAll("details").forEach(function (d) { d.open = true; });
  });
})();
