// logstore console: a little of our own JavaScript, no library. Everything works without it;
// it only refreshes the live parts (a group's lag chart, a live tail of messages) and asks before
// removing an ACL.
"use strict";
(function () {
  const MAX_REFRESHES = 1800; // at most an hour at 2 s: a forgotten tab stops asking
  function refresh(box) {
    const url = box.getAttribute("data-refresh");
    const every = Math.max(1000, parseInt(box.getAttribute("data-every") || "2000", 10));
    let count = 0;
    const timer = setInterval(function () {
      if (++count > MAX_REFRESHES) { clearInterval(timer); return; }
      if (document.hidden) { return; }
      const html = box.getAttribute("data-kind") === "html";
      // X-Console-Fetch: an ended session answers 401 (the box keeps its content), not the login page
      fetch(url, { credentials: "same-origin", redirect: "error",
                   headers: { "Accept": html ? "text/html" : "image/svg+xml", "X-Console-Fetch": "1" } })
        .then(function (r) { return r.ok ? r.text() : null; })
        .then(function (text) {
          if (text === null) { return; }
          if (html) { // our own server-rendered (escaped) fragment: the records of a live tail
            const doc = new DOMParser().parseFromString(text, "text/html");
            box.replaceChildren.apply(box, Array.from(doc.body.childNodes).map(function (n) {
              return document.importNode(n, true);
            }));
            box.setAttribute("data-refreshed", String(count));
            return;
          }
          const doc = new DOMParser().parseFromString(text, "image/svg+xml");
          const node = doc.documentElement;
          if (node && node.nodeName === "svg") {
            box.replaceChildren(document.importNode(node, true));
            box.setAttribute("data-refreshed", String(count));
          }
        })
        .catch(function () { /* the next round tries again */ });
    }, every);
  }
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-refresh]").forEach(refresh);
    document.querySelectorAll("[data-back]").forEach(function (a) {
      a.addEventListener("click", function (e) { e.preventDefault(); history.back(); });
      a.setAttribute("href", "/");
    });
    document.querySelectorAll("form").forEach(function (form) {
      form.addEventListener("submit", function (e) {
        const question = form.getAttribute("data-confirm");
        if (question && !window.confirm(question)) { e.preventDefault(); return; }
        form.querySelectorAll("button[type=submit]").forEach(function (b) { b.setAttribute("aria-busy", "true"); });
      });
    });
  });
})();
