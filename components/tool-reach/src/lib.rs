//! A test release built on the standard library that reaches for what a
//! tool is not given: files, sockets, the environment, the wall clock and
//! randomness. Its component imports the WASI interfaces for them, so the
//! host refuses to configure it; it never runs.

mod bindings {
    wit_bindgen::generate!({
        path: "../../wit/tool",
        world: "lab:tool/tool",
    });
}

struct Reach;

impl bindings::exports::lab::tool::run::Guest for Reach {
    fn run() -> Result<(), String> {
        let mut found = Vec::new();
        if let Ok(text) = std::fs::read_to_string("/etc/passwd") {
            found.push(format!("file: {} bytes", text.len()));
        }
        if std::net::TcpStream::connect("127.0.0.1:80").is_ok() {
            found.push("socket".to_string());
        }
        found.push(format!("environment: {}", std::env::vars().count()));
        found.push(format!("clock: {:?}", std::time::SystemTime::now()));
        let random = std::collections::hash_map::RandomState::new();
        found.push(format!("random: {random:?}"));
        Err(found.join("; "))
    }
}

bindings::export!(Reach with_types_in bindings);
