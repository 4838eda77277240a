// The sign-in form: the token travels once, as a bearer header, to POST
// /ui/login, which answers an HttpOnly cookie (api/console_session.py); the
// token itself is kept nowhere in the browser.
const form = document.getElementById("login");
const error = document.getElementById("error");

form.addEventListener("submit", async (event) => {
  event.preventDefault();
  error.textContent = "";
  const token = document.getElementById("token").value.trim();
  let response;
  try {
    response = await fetch("/ui/login", {
      method: "POST",
      headers: { Authorization: "Bearer " + token },
      credentials: "same-origin",
    });
  } catch (e) {
    error.textContent = "the voter did not answer: " + e;
    return;
  }
  if (response.ok) {
    location.assign("/ui");
    return;
  }
  let message = response.status + " " + response.statusText;
  try {
    message = (await response.json()).errorMessage || message;
  } catch (e) { /* not JSON: the status says it */ }
  error.textContent = message;
});
