(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("ge-data").textContent);
  var views = document.getElementById("views");
  var svgs = {b: document.getElementById("svg-b"), a: document.getElementById("svg-a")};
  var elements = {b: new Map(), a: new Map()};
  var scale = {b: 1, a: 1};
  function esc(s) {
    return String(s).replace(/[&<>"']/g, function (c) {
      return {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c];
    });
  }
  ["b", "a"].forEach(function (side) {
    var svg = svgs[side];
    svg.querySelectorAll("g.node").forEach(function (g) {
      elements[side].set(g.getAttribute("data-key"), g);
    });
    svg.querySelectorAll("path.edge").forEach(function (p) {
      var src = data[side][p.getAttribute("data-from")];
      if (src && src[1] === "Const") { p.classList.add("from-const"); }
    });
  });
  function stateOf(side, key) {
    var g = elements[side].get(key);
    if (!g) { return data[side][key] ? "not drawn" : ""; }
    var s = ["removed", "added", "changed", "matched"].filter(function (c) {
      return g.classList.contains(c);
    });
    return s.join(", ");
  }
  function describe(side, key) {
    var r = data[side][key];
    if (!r) { return ""; }
    var label = data.labels[side === "b" ? 0 : 1];
    var h = "<b>" + esc(r[1]) + "</b> <span class='k'>" + esc(label) + "</span><br>" + esc(r[0]);
    var st = stateOf(side, key);
    if (st) { h += "<br><span class='k'>state:</span> " + esc(st); }
    if (r[2] && key.indexOf("::") >= 0) { h += "<br><span class='k'>graph:</span> " + esc(r[2]); }
    h += "<table>";
    r[3].forEach(function (inp, i) {
      h += "<tr><td class='k'>in " + i + "</td><td>" + (inp[0] === null ? "(none)" :
        esc(inp[2]) + " <span class='k'>from " + esc(inp[0]) + ":" + inp[1] + "</span> " +
        esc(inp[4]) + " " + esc(inp[3])) + "</td></tr>";
    });
    r[4].forEach(function (out, i) {
      h += "<tr><td class='k'>out " + i + "</td><td>" + esc(out[0]) + " " + esc(out[2]) + " " +
        esc(out[1]) + "</td></tr>";
    });
    Object.keys(r[5]).forEach(function (name) {
      h += "<tr><td class='k'>" + esc(name) + "</td><td>" + esc(r[5][name]) + "</td></tr>";
    });
    h += "</table>";
    if (r[6]) {
      h += "<span class='k'>made by</span> " + esc(r[6]);
      if (r[7].length) { h += " <span class='k'>from</span> " + esc(r[7].join(", ")); }
    }
    return h;
  }
  var tip = document.getElementById("tip");
  function sideOf(el) { return el.closest("svg").id === "svg-b" ? "b" : "a"; }
  document.addEventListener("mouseover", function (ev) {
    var g = ev.target.closest && ev.target.closest("g.node");
    if (!g) { tip.hidden = true; return; }
    tip.innerHTML = describe(sideOf(g), g.getAttribute("data-key"));
    tip.hidden = false;
  });
  document.addEventListener("mousemove", function (ev) {
    if (tip.hidden) { return; }
    var x = ev.clientX + 14, y = ev.clientY + 14;
    var w = tip.offsetWidth, h = tip.offsetHeight;
    if (x + w > window.innerWidth) { x = Math.max(0, ev.clientX - w - 14); }
    if (y + h > window.innerHeight) { y = Math.max(0, ev.clientY - h - 14); }
    tip.style.left = x + "px"; tip.style.top = y + "px";
  });
  var details = document.getElementById("details");
  function showDetails(key) {
    var h = "";
    ["b", "a"].forEach(function (side) {
      if (data[side][key]) { h += "<div>" + describe(side, key) + "</div>"; }
    });
    details.innerHTML = h || esc(key) + " <span class='k'>is in neither graph</span>";
    details.classList.remove("muted");
  }
  function clearHighlight() {
    ["b", "a"].forEach(function (side) {
      svgs[side].classList.remove("focus");
      svgs[side].querySelectorAll(".hl").forEach(function (g) { g.classList.remove("hl"); });
    });
    document.querySelectorAll(".pass.sel").forEach(function (li) { li.classList.remove("sel"); });
  }
  function highlight(keysBySide, scroll) {
    clearHighlight();
    var first = {};
    ["b", "a"].forEach(function (side) {
      var any = false;
      keysBySide[side].forEach(function (k) {
        var g = elements[side].get(k);
        if (g) { g.classList.add("hl"); any = true; if (!first[side]) { first[side] = g; } }
      });
      if (any) { svgs[side].classList.add("focus"); }
    });
    if (scroll) {
      ["b", "a"].forEach(function (side) {
        if (first[side]) { first[side].scrollIntoView({block: "center", inline: "center"}); }
      });
    }
  }
  document.querySelectorAll(".pass").forEach(function (li) {
    li.querySelector(".pass-head").addEventListener("click", function () {
      var was = li.classList.contains("sel");
      var p = data.passes[Number(li.getAttribute("data-pass-index"))];
      if (was) { clearHighlight(); return; }
      var both = p.matched.concat(p.rewired);
      highlight({b: p.removed.concat(both), a: p.added.concat(both)}, true);
      li.classList.add("sel");
    });
  });
  document.addEventListener("click", function (ev) {
    var chip = ev.target.closest && ev.target.closest(".chip");
    if (chip) {
      var k = chip.getAttribute("data-key");
      highlight({b: [k], a: [k]}, true);
      var li = chip.closest(".pass");
      if (li) { li.classList.add("sel"); }
      showDetails(k);
      return;
    }
    var g = ev.target.closest && ev.target.closest("g.node");
    if (g) {
      var key = g.getAttribute("data-key");
      highlight({b: [key], a: [key]}, false);
      showDetails(key);
    }
  });
  document.getElementById("clear").addEventListener("click", clearHighlight);
  var search = document.getElementById("search");
  var results = document.getElementById("results");
  var count = document.getElementById("search-count");
  function runSearch() {
    var q = search.value.trim().toLowerCase();
    results.innerHTML = "";
    var found = 0, listed = 0, seen = new Set();
    ["b", "a"].forEach(function (side) {
      var svg = svgs[side];
      svg.querySelectorAll(".found").forEach(function (g) { g.classList.remove("found"); });
      svg.classList.toggle("searching", q.length > 0);
      if (!q) { return; }
      Object.keys(data[side]).forEach(function (k) {
        var r = data[side][k];
        if (r[0].toLowerCase().indexOf(q) < 0 && r[1].toLowerCase().indexOf(q) < 0 &&
            k.toLowerCase().indexOf(q) < 0) { return; }
        found++;
        var g = elements[side].get(k);
        if (g) { g.classList.add("found"); }
        if (!seen.has(k) && listed < 200) {
          seen.add(k); listed++;
          var li = document.createElement("li");
          li.textContent = r[0] + "  (" + r[1] + ")";
          li.setAttribute("data-key", k);
          li.addEventListener("click", function () {
            highlight({b: [k], a: [k]}, true); showDetails(k);
          });
          results.appendChild(li);
        }
      });
    });
    count.textContent = q ? found + " match(es)" + (listed >= 200 ? ", 200 listed" : "") : "";
  }
  search.addEventListener("input", runSearch);
  function setMode(mode) {
    ["both", "before", "after"].forEach(function (m) { views.classList.remove("mode-" + m); });
    views.classList.add("mode-" + mode);
    document.querySelectorAll("[data-mode]").forEach(function (o) {
      o.classList.toggle("on", o.getAttribute("data-mode") === mode);
    });
  }
  document.querySelectorAll("[data-mode]").forEach(function (b) {
    b.addEventListener("click", function () {
      setMode(b.getAttribute("data-mode"));
      visibleSides().forEach(fit);
    });
  });
  var wanted = window.location.hash.replace("#", "");
  if (["both", "before", "after"].indexOf(wanted) >= 0) { setMode(wanted); }
  function applyScale(side) {
    var svg = svgs[side];
    svg.setAttribute("width", Number(svg.getAttribute("data-w")) * scale[side]);
    svg.setAttribute("height", Number(svg.getAttribute("data-h")) * scale[side]);
  }
  function fit(side, floor) {
    var box = svgs[side].parentNode;
    var w = Number(svgs[side].getAttribute("data-w"));
    var avail = Math.max(100, box.clientWidth - 4);
    scale[side] = Math.max(floor || 0.05, Math.min(1, avail / w));
    applyScale(side);
  }
  function visibleSides() {
    return ["b", "a"].filter(function (s) { return svgs[s].offsetParent !== null; });
  }
  document.querySelectorAll("[data-zoom]").forEach(function (b) {
    b.addEventListener("click", function () {
      var how = b.getAttribute("data-zoom");
      visibleSides().forEach(function (side) {
        if (how === "fit") { fit(side, 0.05); return; }
        scale[side] = Math.max(0.05, Math.min(4, scale[side] * (how === "in" ? 1.25 : 0.8)));
        applyScale(side);
      });
    });
  });
  ["b", "a"].forEach(function (side) {
    svgs[side].parentNode.addEventListener("wheel", function (ev) {
      if (!ev.ctrlKey) { return; }
      ev.preventDefault();
      scale[side] = Math.max(0.05, Math.min(4, scale[side] * (ev.deltaY < 0 ? 1.1 : 0.9)));
      applyScale(side);
    }, {passive: false});
  });
  visibleSides().forEach(function (side) { fit(side, 0.5); });
  document.getElementById("show-consts").addEventListener("change", function (ev) {
    views.classList.toggle("hide-consts", !ev.target.checked);
  });
  document.body.setAttribute("data-ready", "1");
  document.body.setAttribute("data-nodes", elements.b.size + "/" + elements.a.size);
})();
