//! The web UI signs in through an identity provider: a real `agentd serve`
//! with `[server.oidc]`, the testkit's OIDC provider, and `node
//! web/e2e/oidc.mjs` driving chromium (the tools of `web_ui`). Then: the
//! user was created, their groups gave admin and a profile, and the
//! provider saw PKCE S256 with a verifier that matched.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use agentd_testkit::idp::IdentityProvider;
use reqwest::StatusCode;
use serde_json::json;

use crate::serve_harness::Harness;
use crate::web_ui::run_scenarios;

const IDP_NAME: &str = "Test IdP";

#[tokio::test]
async fn the_browser_signs_in_through_the_identity_provider() {
    let idp = IdentityProvider::start("agentd-web", "web-secret-123")
        .await
        .unwrap();
    idp.set_user(json!({"sub": "olivia", "groups": ["ops", "devs", "unmapped"]}));
    let toml = format!(
        "[server]\nauth = \"token\"\n\
         [server.oidc]\nissuer = \"{}\"\nclient_id = \"agentd-web\"\nname = \"{IDP_NAME}\"\n\
         [server.oidc.groups.ops]\nadmin = true\n\
         [server.oidc.groups.devs]\nprofiles = [\"yolo\"]\nmodels = [\"big\"]\n\
         [profiles.yolo]\nmode = \"bypass\"\n",
        idp.issuer()
    );
    let h = Harness::new(json!({"replies": []}), &toml).await;
    let root = h
        .cli(&["tokens", "create", "--user", "root", "--admin"])
        .await;
    assert_eq!(root.0, 0, "{}", root.2);
    let root = root.1.trim().to_string();
    // The secret comes from the environment, as operators keep it.
    let server = h
        .start_with_env(&[("AGENTD_OIDC_CLIENT_SECRET", "web-secret-123")])
        .await;
    let (_, before) = server.as_user(&root).get("/v1/admin/users/olivia").await;
    assert!(before["created_at"].is_null(), "{before}");

    // No API token: the browser signs in through the provider.
    let env = [("AGENTD_IDP_NAME", IDP_NAME)];
    run_scenarios("oidc.mjs", &h, &server, "", "olivia", &env).await;

    // The provider got PKCE S256 and a verifier that matched it.
    let requests = idp.requests();
    let authorize = requests
        .iter()
        .find(|r| r.path == "/authorize")
        .expect("no /authorize");
    assert_eq!(authorize.params["code_challenge_method"], "S256");
    assert!(authorize.params.contains_key("nonce") && authorize.params.contains_key("state"));
    let token = requests
        .iter()
        .find(|r| r.path == "/token")
        .expect("no /token");
    assert_eq!(token.pkce_ok, Some(true), "{token:?}");
    assert!(token.params["code_verifier"].len() >= 43);
    // The user was created, and their groups mapped to admin and grants.
    let (status, user) = server.as_user(&root).get("/v1/admin/users/olivia").await;
    assert_eq!(status, StatusCode::OK, "{user}");
    assert!(user["created_at"].is_string(), "{user}");
    assert_eq!(user["is_admin"], true, "{user}");
    assert_eq!(user["grants"]["profiles"], json!(["yolo"]), "{user}");
    assert_eq!(user["grants"]["models"], json!(["big"]), "{user}");
}

#[tokio::test]
async fn the_callback_refuses_a_foreign_state_and_redirects_only_here() {
    let idp = IdentityProvider::start("agentd-web", "s3cret")
        .await
        .unwrap();
    let toml = format!(
        "[server]\nauth = \"token\"\n[server.oidc]\nissuer = \"{}\"\nclient_id = \"agentd-web\"\n\
         client_secret = \"s3cret\"\n",
        idp.issuer()
    );
    let h = Harness::new(json!({"replies": []}), &toml).await;
    let server = h.start().await;
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let (_, methods) = server.get("/v1/auth/methods").await;
    let host = idp.issuer().trim_start_matches("http://").to_string();
    assert_eq!(methods["oidc"]["name"], host.split(':').next().unwrap());
    // `next` elsewhere is dropped for `/`; the flow cookie carries it.
    let (cookie, callback) = through_provider(&client, &server.url, idp.issuer()).await;
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Lax"),
        "{cookie}"
    );
    let flow = cookie.split(';').next().unwrap().to_string();
    // Another state than this browser's: refused, no session cookie.
    let forged = callback.replace("state=", "state=x");
    let answer = client
        .get(&forged)
        .header("cookie", &flow)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::BAD_REQUEST);
    assert!(answer.headers().get("set-cookie").is_none());
    // No flow cookie at all: refused too.
    let answer = client.get(&callback).send().await.unwrap();
    assert_eq!(answer.status(), StatusCode::BAD_REQUEST);
    // A used code cannot be replayed, so start again and finish properly.
    let (status, cookies, page) = crate::oidc_accounts::sign_in(&server, &idp).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(page.contains("url=/\"") && !page.contains("evil"), "{page}");
    // The cookie works as the provider's user.
    assert_eq!(crate::oidc_accounts::who(&server, &cookies).await, "alice");
}

/// Start a sign-in (with a `next` elsewhere) and let the provider answer:
/// the flow's `Set-Cookie` and the callback URL the browser is sent to.
pub(crate) async fn through_provider(
    client: &reqwest::Client,
    url: &str,
    issuer: &str,
) -> (String, String) {
    let login = client
        .get(format!("{url}/v1/auth/oidc/login?next=//evil.example/x"))
        .send()
        .await
        .unwrap();
    assert_eq!(login.status(), StatusCode::SEE_OTHER);
    let location = login.headers()["location"].to_str().unwrap().to_string();
    assert!(
        location.starts_with(&format!("{issuer}/authorize?")),
        "{location}"
    );
    let cookie = login.headers()["set-cookie"].to_str().unwrap().to_string();
    let back = client.get(&location).send().await.unwrap();
    let callback = back.headers()["location"].to_str().unwrap().to_string();
    (cookie, callback)
}
