//! "Sign in with …" without a browser, against the real `agentd serve` and
//! the testkit's provider: who may sign in (allow-lists, existing users,
//! `local`), what groups give and take back, which id_tokens are refused,
//! and the cookies' `Secure` flag from an https callback address.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use agentd_testkit::idp::IdentityProvider;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::serve_harness::{Harness, Server};
use crate::web_oidc::through_provider;

const CLIENT: &str = "agentd-web";
const SECRET: &str = "web-secret-123";

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// A server signing in at `idp`, with more `[server.oidc]` lines, and the
/// token of `root`, an admin.
async fn serve(idp: &IdentityProvider, oidc: &str) -> (Harness, Server, String) {
    let toml = format!(
        "[server]\nauth = \"token\"\n[server.oidc]\nissuer = \"{}\"\nclient_id = \"{CLIENT}\"\n\
         client_secret = \"{SECRET}\"\n{oidc}\n[profiles.yolo]\nmode = \"bypass\"\n\
         [profiles.careful]\nmode = \"default\"\n",
        idp.issuer()
    );
    let h = Harness::new(json!({"replies": []}), &toml).await;
    let (code, root, stderr) = h
        .cli(&["tokens", "create", "--user", "root", "--admin"])
        .await;
    assert_eq!(code, 0, "{stderr}");
    let server = h.start().await;
    (h, server, root.trim().to_string())
}

/// One sign-in by the provider's current user: the callback's status, its
/// `Set-Cookie`s and body.
pub(crate) async fn sign_in(
    server: &Server,
    idp: &IdentityProvider,
) -> (StatusCode, Vec<String>, String) {
    let client = client();
    let (cookie, callback) = through_provider(&client, &server.url, idp.issuer()).await;
    let flow = cookie.split(';').next().unwrap().to_string();
    let done = client
        .get(&callback)
        .header("cookie", &flow)
        .send()
        .await
        .unwrap();
    let status = done.status();
    let cookies = done
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .collect();
    (status, cookies, done.text().await.unwrap())
}

/// Who the session cookie among `cookies` signs in as.
pub(crate) async fn who(server: &Server, cookies: &[String]) -> Value {
    let session = cookies
        .iter()
        .find(|c| c.starts_with("agentd_session=agentd_"))
        .expect("no session cookie");
    let (status, me) = server
        .send(
            client()
                .get(format!("{}/v1/auth/me", server.url))
                .header("cookie", session.split(';').next().unwrap()),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{me}");
    me["user"].clone()
}

#[tokio::test]
async fn existing_users_and_local_are_not_taken_over_unless_linking_is_on() {
    let idp = IdentityProvider::start(CLIENT, SECRET).await.unwrap();
    let (_h, server, _root) = serve(&idp, "user_claim = \"preferred_username\"").await;
    for name in ["root", "local"] {
        idp.set_user(json!({"sub": format!("sub-{name}"), "preferred_username": name}));
        let (status, cookies, body) = sign_in(&server, &idp).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{name}: {body}");
        assert!(
            !cookies
                .iter()
                .any(|c| c.starts_with("agentd_session=agentd_"))
        );
    }
    // An email names a user only when the provider verified it.
    let (_h, server, _root) = serve(&idp, "user_claim = \"email\"").await;
    idp.set_user(json!({"sub": "e-1", "email": "eve@corp.example", "email_verified": false}));
    assert_eq!(sign_in(&server, &idp).await.0, StatusCode::FORBIDDEN);
    idp.set_user(json!({"sub": "e-1", "email": "eve@corp.example", "email_verified": true}));
    let (status, cookies, body) = sign_in(&server, &idp).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(who(&server, &cookies).await, "eve@corp.example");

    // Opted in: the existing root is linked to the account, once.
    let (_h, server, _root) = serve(
        &idp,
        "user_claim = \"preferred_username\"\nlink_existing_users = true",
    )
    .await;
    idp.set_user(json!({"sub": "sub-root", "preferred_username": "root"}));
    let (status, cookies, body) = sign_in(&server, &idp).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(who(&server, &cookies).await, "root");
    idp.set_user(json!({"sub": "another", "preferred_username": "root"}));
    assert_eq!(sign_in(&server, &idp).await.0, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn allow_lists_keep_others_out_and_make_no_user() {
    let idp = IdentityProvider::start(CLIENT, SECRET).await.unwrap();
    let (_h, server, root) = serve(
        &idp,
        "allowed_groups = [\"staff\"]\nallowed_domains = [\"corp.example\"]",
    )
    .await;
    let cases = [
        (
            "no allowed group",
            json!({"sub": "x", "groups": ["ops"], "email": "x@corp.example", "email_verified": true}),
        ),
        (
            "another domain",
            json!({"sub": "x", "groups": ["staff"], "email": "x@else.example", "email_verified": true}),
        ),
        (
            "an unverified email",
            json!({"sub": "x", "groups": ["staff"], "email": "x@corp.example"}),
        ),
    ];
    for (what, user) in cases {
        idp.set_user(user);
        assert_eq!(
            sign_in(&server, &idp).await.0,
            StatusCode::FORBIDDEN,
            "{what}"
        );
    }
    let (_, x) = server.as_user(&root).get("/v1/admin/users/x").await;
    assert!(x["created_at"].is_null(), "no user was made: {x}");
    idp.set_user(
        json!({"sub": "x", "groups": ["staff"], "email": "x@CORP.example", "email_verified": true}),
    );
    let (status, cookies, body) = sign_in(&server, &idp).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(who(&server, &cookies).await, "x");

    // create_users = false: only accounts linked already sign in.
    let (_h, server, _) = serve(&idp, "create_users = false").await;
    idp.set_user(json!({"sub": "newcomer"}));
    assert_eq!(sign_in(&server, &idp).await.0, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn what_groups_gave_is_taken_back_when_the_groups_go() {
    let idp = IdentityProvider::start(CLIENT, SECRET).await.unwrap();
    let groups = "[server.oidc.groups.ops]\nadmin = true\n\
                  [server.oidc.groups.devs]\nprofiles = [\"yolo\"]\nmodels = [\"big\"]";
    let (_h, server, root) = serve(&idp, groups).await;
    let root = server.as_user(&root);
    idp.set_user(json!({"sub": "olivia", "groups": ["ops", "devs"]}));
    assert_eq!(sign_in(&server, &idp).await.0, StatusCode::OK);
    let (_, user) = root.get("/v1/admin/users/olivia").await;
    assert_eq!(user["is_admin"], true, "{user}");
    assert_eq!(user["grants"]["profiles"], json!(["yolo"]), "{user}");
    // An admin grants another profile by hand.
    let (status, body) = root
        .post(
            "/v1/admin/users/olivia/grants",
            json!({"kind": "profile", "name": "careful"}),
        )
        .await;
    assert!(status.is_success(), "{status} {body}");
    // Out of both groups: what they gave goes, the hand-made grant stays.
    idp.set_user(json!({"sub": "olivia", "groups": []}));
    assert_eq!(sign_in(&server, &idp).await.0, StatusCode::OK);
    let (_, user) = root.get("/v1/admin/users/olivia").await;
    assert_eq!(user["is_admin"], false, "{user}");
    assert_eq!(user["grants"]["profiles"], json!(["careful"]), "{user}");
    assert_eq!(user["grants"]["models"], json!([]), "{user}");
}

#[tokio::test]
async fn id_tokens_with_a_wrong_nonce_issuer_audience_or_time_are_refused() {
    let idp = IdentityProvider::start(CLIENT, SECRET).await.unwrap();
    let (_h, server, _) = serve(&idp, "").await;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let cases = [
        ("no nonce", json!({"nonce": null})),
        ("another nonce", json!({"nonce": "A".repeat(43)})),
        ("another issuer", json!({"iss": "http://127.0.0.1:1"})),
        ("another audience", json!({"aud": "someone-else"})),
        (
            "several audiences, azp not ours",
            json!({"aud": [CLIENT, "other"], "azp": "other"}),
        ),
        ("expired", json!({"exp": now - 600})),
    ];
    for (what, overrides) in cases {
        idp.override_id_tokens(overrides);
        let (status, cookies, body) = sign_in(&server, &idp).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{what}: {body}");
        assert!(
            !cookies
                .iter()
                .any(|c| c.starts_with("agentd_session=agentd_")),
            "{what}"
        );
        // The browser is not told why; the log is.
        assert!(
            !body.contains("nonce") && !body.contains("127.0.0.1"),
            "{what}: {body}"
        );
    }
    idp.override_id_tokens(json!({"aud": [CLIENT, "other"], "azp": CLIENT}));
    assert_eq!(sign_in(&server, &idp).await.0, StatusCode::OK);
}

#[tokio::test]
async fn concurrent_first_sign_ins_of_one_account_both_work() {
    let idp = IdentityProvider::start(CLIENT, SECRET).await.unwrap();
    let (_h, server, _) = serve(&idp, "").await;
    idp.set_user(json!({"sub": "twin"}));
    let (a, b) = tokio::join!(sign_in(&server, &idp), sign_in(&server, &idp));
    assert_eq!(
        (a.0, b.0),
        (StatusCode::OK, StatusCode::OK),
        "{} / {}",
        a.2,
        b.2
    );
    assert_eq!(who(&server, &a.1).await, "twin");
    assert_eq!(who(&server, &b.1).await, "twin");
}

#[tokio::test]
async fn an_https_callback_address_makes_the_cookies_secure() {
    let idp = IdentityProvider::start(CLIENT, SECRET).await.unwrap();
    let (_h, server, _) = serve(
        &idp,
        "redirect_url = \"https://agentd.example/v1/auth/oidc/callback\"\nsession_max_age_s = 3600",
    )
    .await;
    let client = client();
    let (cookie, callback) = through_provider(&client, &server.url, idp.issuer()).await;
    assert!(cookie.contains("; Secure"), "{cookie}");
    // The provider sends the browser to agentd.example, which is this server.
    let callback = callback.replace("https://agentd.example", &server.url);
    let done = client
        .get(&callback)
        .header("cookie", cookie.split(';').next().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(done.status(), StatusCode::OK);
    let session = done
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .find(|c| c.starts_with("agentd_session=agentd_"))
        .unwrap();
    assert!(
        session.contains("; Secure") && session.contains("Max-Age=3600"),
        "{session}"
    );
}
