// The API reference: Swagger UI (vendored, window.SwaggerUIBundle) over this site's schema, in a
// layout of our own (SiteLayout) and with names added where Swagger UI leaves controls unnamed, so
// the page passes axe like every other page.
const root = document.getElementById("api-reference");
const dark = window.matchMedia("(prefers-color-scheme: dark)");
const followScheme = () => document.documentElement.classList.toggle("dark-mode", dark.matches);
followScheme();
dark.addEventListener("change", followScheme);

// Swagger UI's BaseLayout without its own <main> (the page has one), its title block (the page's
// heading says it) and the list of every schema (each operation shows its own).
function SiteLayoutPlugin(system) {
  const h = system.React.createElement;
  function SiteLayout({ getComponent, specSelectors }) {
    const [Row, Col] = [getComponent("Row"), getComponent("Col")];
    const Errors = getComponent("errors", true);
    const status = specSelectors.loadingStatus();
    if (status === "failed" || status === "failedConfig") {
      return h("div", { className: "swagger-ui" },
        h("p", { role: "alert" }, "The API's schema could not be loaded: reload the page."), h(Errors));
    }
    if (status !== "success" || !specSelectors.specStr()) {
      return h("div", { className: "swagger-ui" }, h("p", { role: "status" }, "Loading the reference…"));
    }
    const Operations = getComponent("operations", true);
    const Authorize = getComponent("AuthorizeBtnContainer", true);
    return h("div", { className: "swagger-ui" },
      h(getComponent("SvgAssets")), h(Errors),
      specSelectors.securityDefinitions()
        ? h("div", { className: "scheme-container" }, h(Col, { className: "schemes wrapper", mobile: 12 }, h(Authorize)))
        : null,
      h("div", { id: "operations" }, h(Row, null, h(Col, { mobile: 12, desktop: 12 }, h(Operations)))));
  }
  return { components: { SiteLayout } };
}

// What Swagger UI draws without a name or keyboard access: a parameter's choices (named by the
// parameter) and the examples that scroll (focusable, so a keyboard can scroll them).
function nameControls() {
  for (const select of root.querySelectorAll("tr[data-param-name] select:not([aria-label])")) {
    select.setAttribute("aria-label", select.closest("tr").dataset.paramName);
  }
  for (const example of root.querySelectorAll("pre.microlight:not([tabindex])")) {
    example.setAttribute("tabindex", "0");
  }
}
new MutationObserver(nameControls).observe(root, { childList: true, subtree: true });

window.SwaggerUIBundle({
  url: root.dataset.schemaUrl,
  domNode: root,
  deepLinking: false,  // a link inside each operation's button: a control nested in a control
  validatorUrl: null,  // its badge would be fetched from another host
  docExpansion: "list",
  presets: [window.SwaggerUIBundle.presets.apis],
  plugins: [SiteLayoutPlugin],
  layout: "SiteLayout",
  // "Try it out" acts as the signed-in person: the session's cookie, and the CSRF token its
  // unsafe methods need.
  requestInterceptor: (request) => {
    request.headers["X-CSRFToken"] = root.dataset.csrfToken;
    return request;
  },
});
