//! Two "hosts" on one machine: two network namespaces joined by a veth pair, and a private
//! PostgreSQL server listening on host A's address only. Created by [`TwoHosts::new`], removed
//! (server stopped, namespaces deleted, data dir removed) when dropped.

use std::os::unix::fs::chown;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The two namespaces, their addresses and the server in `a`.
pub struct TwoHosts {
    pub a: String,
    pub b: String,
    pub server_address: String,
    /// `postgres://…` of the server, reachable from both namespaces.
    pub url: String,
    pg_bin: PathBuf,
    data: Option<tempfile::TempDir>,
}

fn run(program: &str, args: &[&str]) -> Result<(), String> {
    let output = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{program}: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{program} {args:?}: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

impl TwoHosts {
    /// Sets everything up; `Err` says why this machine cannot (not root, no `ip netns`, no
    /// PostgreSQL binaries).
    pub fn new() -> Result<Self, String> {
        if !rustix::process::geteuid().is_root() {
            return Err("network namespaces need root".into());
        }
        let pg_bin = PathBuf::from(
            std::env::var("TASKS_TEST_PG_BIN")
                .map_err(|_| "TASKS_TEST_PG_BIN is not set (.ci/postgres.sh start sets it)")?,
        );
        let tag = std::process::id() % 100_000;
        let net = 1 + std::process::id() % 250;
        let mut hosts = Self {
            a: format!("tlA{tag}"),
            b: format!("tlB{tag}"),
            server_address: format!("10.231.{net}.1"),
            url: String::new(),
            pg_bin,
            data: None,
        };
        hosts.url = format!("postgres://postgres@{}:5432/postgres", hosts.server_address);
        hosts.create_network(net)?;
        hosts.start_server(net)?;
        Ok(hosts)
    }

    fn create_network(&self, net: u32) -> Result<(), String> {
        let (va, vb) = (format!("{}v", self.a), format!("{}v", self.b));
        run("ip", &["netns", "add", &self.a])?;
        run("ip", &["netns", "add", &self.b])?;
        run(
            "ip",
            &["link", "add", &va, "type", "veth", "peer", "name", &vb],
        )?;
        for (ns, link, host) in [(&self.a, &va, 1), (&self.b, &vb, 2)] {
            run("ip", &["link", "set", link, "netns", ns])?;
            let address = format!("10.231.{net}.{host}/24");
            run("ip", &["-n", ns, "addr", "add", &address, "dev", link])?;
            run("ip", &["-n", ns, "link", "set", link, "up"])?;
            run("ip", &["-n", ns, "link", "set", "lo", "up"])?;
        }
        Ok(())
    }

    fn start_server(&mut self, net: u32) -> Result<(), String> {
        let data = tempfile::tempdir().map_err(|e| e.to_string())?;
        let uid_gid = |name: &str| {
            let out = Command::new("id").arg(name).output().ok()?;
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            let num = |key: &str| text.split(key).nth(1)?.split('(').next()?.parse().ok();
            Some((num("uid=")?, num("gid=")?))
        };
        let (uid, gid) =
            uid_gid("postgres").ok_or("no postgres user (.ci/postgres.sh creates it)")?;
        chown(data.path(), Some(uid), Some(gid)).map_err(|e| e.to_string())?;
        let dir = data.path().join("data");
        let dir_text = dir.display().to_string();
        self.data = Some(data);
        self.as_postgres(
            None,
            "initdb",
            &["-D", &dir_text, "-U", "postgres", "--auth=trust"],
        )?;
        let hba = dir.join("pg_hba.conf");
        let mut rules = std::fs::read_to_string(&hba).map_err(|e| e.to_string())?;
        rules.push_str(&format!("host all all 10.231.{net}.0/24 trust\n"));
        std::fs::write(&hba, rules).map_err(|e| e.to_string())?;
        let options = format!(
            "-c listen_addresses={} -c port=5432 -c unix_socket_directories={}",
            self.server_address,
            self.data_path().display()
        );
        let log = self.data_path().join("server.log").display().to_string();
        let ns = self.a.clone();
        self.as_postgres(
            Some(&ns),
            "pg_ctl",
            &[
                "-D", &dir_text, "-l", &log, "-w", "-t", "60", "-o", &options, "start",
            ],
        )
    }

    fn data_path(&self) -> &Path {
        self.data
            .as_ref()
            .map_or(Path::new("/nonexistent"), |d| d.path())
    }

    /// Runs a PostgreSQL program as `postgres`, in namespace `ns` if given.
    fn as_postgres(&self, ns: Option<&str>, program: &str, args: &[&str]) -> Result<(), String> {
        let program = self.pg_bin.join(program).display().to_string();
        let mut all: Vec<&str> = Vec::new();
        if let Some(ns) = ns {
            all.extend(["netns", "exec", ns]);
        }
        all.extend(["runuser", "-u", "postgres", "--", &program]);
        all.extend(args);
        match ns {
            Some(_) => run("ip", &all),
            None => run(all[0], &all[1..]),
        }
    }

    /// A command running `program` inside namespace `ns`.
    pub fn command_in(&self, ns: &str, program: &Path) -> Command {
        let mut command = Command::new("ip");
        command.args(["netns", "exec", ns]).arg(program);
        command
    }
}

impl Drop for TwoHosts {
    fn drop(&mut self) {
        let dir = self.data_path().join("data").display().to_string();
        if self.data.is_some() {
            let ns = self.a.clone();
            let _ = self.as_postgres(
                Some(&ns),
                "pg_ctl",
                &["-D", &dir, "-m", "immediate", "stop"],
            );
        }
        // Deleting a namespace deletes the veth end in it, and with it the pair.
        let _ = run("ip", &["netns", "del", &self.a]);
        let _ = run("ip", &["netns", "del", &self.b]);
    }
}
