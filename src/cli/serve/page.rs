//! The page: one HTML file, one script and one style sheet, built into the binary. The script
//! is served from `/app.js`, so the page's Content-Security-Policy allows no inline script at
//! all; the script writes what an agent wrote as text (`textContent`), never as markup.

/// The page's policy: its own script, style and requests only; no inline script, no frame of
/// it elsewhere, no form sent anywhere.
pub(super) const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
                              connect-src 'self'; img-src 'self' data:; frame-src 'self'; \
                              frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

/// The report page's policy: its inline style and pictures, no script at all, framed only by
/// the page.
pub(super) const REPORT_CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; \
                                     img-src data:; frame-ancestors 'self'; base-uri 'none'; \
                                     form-action 'none'";

const HTML: &str = include_str!("page.html");
pub(super) const JS: &str = include_str!("app.js");
pub(super) const CSS: &str = include_str!("app.css");

/// The page, with the token its script sends in `X-Loop-CSRF` (hex: nothing to escape).
pub(super) fn html(token: &str) -> String {
    debug_assert!(token.chars().all(|c| c.is_ascii_hexdigit()));
    HTML.replace("{{CSRF}}", token)
}
