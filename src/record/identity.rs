//! Who the recorded command runs as. memtrack needs root to load BPF programs; the command it
//! records should not have it. Under sudo the command runs as the invoking user (SUDO_UID and
//! SUDO_GID, that user's supplementary groups, and HOME, USER and LOGNAME from their passwd
//! entry); `--user NAME` picks another user, `--user root` keeps root.
//!
//! Users and groups are read from /etc/passwd and /etc/group directly rather than through NSS
//! (getpwnam_r, getgrouplist): the shipped binary is static, and a static glibc loading the
//! runner's NSS modules is unsupported. A user known only to LDAP or sssd still works through
//! SUDO_UID and SUDO_GID; only their supplementary groups and HOME are then unknown.

use std::path::PathBuf;

use crate::error::Error;
use crate::sys::process::Credentials;

/// A user the command runs as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// The login name (or the uid as text when no passwd entry names it).
    pub name: String,
    /// The user id the command runs with.
    pub uid: u32,
    /// The primary group id (SUDO_GID, else the passwd entry's).
    pub gid: u32,
    /// Supplementary groups: `gid` and every group of /etc/group that lists `name`.
    pub groups: Vec<u32>,
    /// The home directory from the passwd entry.
    pub home: Option<PathBuf>,
}

impl Identity {
    /// What the child process takes on before exec.
    pub fn credentials(&self) -> Credentials {
        Credentials {
            uid: self.uid,
            gid: self.gid,
            groups: self.groups.clone(),
        }
    }
}

/// What the decision depends on, read from the system (see [`Context::from_system`]) or made
/// up by tests.
#[derive(Clone, Debug, Default)]
pub struct Context {
    /// Our effective uid.
    pub euid: u32,
    /// SUDO_UID as set by sudo: the invoking user's uid.
    pub sudo_uid: Option<String>,
    /// SUDO_GID as set by sudo: the invoking user's primary group.
    pub sudo_gid: Option<String>,
    /// SUDO_USER as set by sudo: the invoking user's name.
    pub sudo_user: Option<String>,
    /// The text of /etc/passwd.
    pub passwd: String,
    /// The text of /etc/group.
    pub group: String,
}

impl Context {
    /// Read the environment and the user databases.
    pub fn from_system() -> Context {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        Context {
            euid: crate::sys::process::geteuid(),
            sudo_uid: var("SUDO_UID"),
            sudo_gid: var("SUDO_GID"),
            sudo_user: var("SUDO_USER"),
            passwd: std::fs::read_to_string("/etc/passwd").unwrap_or_default(),
            group: std::fs::read_to_string("/etc/group").unwrap_or_default(),
        }
    }
}

/// One line of /etc/passwd.
struct PasswdEntry<'a> {
    name: &'a str,
    uid: u32,
    gid: u32,
    home: &'a str,
}

fn passwd_entries(passwd: &str) -> impl Iterator<Item = PasswdEntry<'_>> {
    passwd.lines().filter_map(|line| {
        let f: Vec<&str> = line.split(':').collect();
        if f.len() < 7 || line.starts_with('#') {
            return None;
        }
        Some(PasswdEntry {
            name: f[0],
            uid: f[2].parse().ok()?,
            gid: f[3].parse().ok()?,
            home: f[5],
        })
    })
}

/// `gid` and the groups of /etc/group whose member list names `user`, in file order, once each.
fn groups_of(group: &str, user: &str, gid: u32) -> Vec<u32> {
    let mut groups = vec![gid];
    for line in group.lines().filter(|l| !l.starts_with('#')) {
        let f: Vec<&str> = line.split(':').collect();
        if f.len() < 4 {
            continue;
        }
        let Ok(g) = f[2].parse::<u32>() else {
            continue;
        };
        if f[3].split(',').any(|m| m.trim() == user) && !groups.contains(&g) {
            groups.push(g);
        }
    }
    groups
}

fn from_entry(ctx: &Context, e: &PasswdEntry<'_>, gid: u32) -> Identity {
    Identity {
        name: e.name.to_string(),
        uid: e.uid,
        gid,
        groups: groups_of(&ctx.group, e.name, gid),
        home: (!e.home.is_empty()).then(|| PathBuf::from(e.home)),
    }
}

/// Decide who the command runs as: `None` to run it as we are (not root, or root by choice or
/// without sudo), or the user to switch to.
pub fn resolve(user: Option<&str>, ctx: &Context) -> Result<Option<Identity>, Error> {
    if let Some(user) = user {
        let entry = passwd_entries(&ctx.passwd)
            .find(|e| e.name == user || user.parse::<u32>().ok() == Some(e.uid))
            .ok_or_else(|| {
                Error::Usage(format!(
                    "--user {user}: no such user in /etc/passwd; give a user name or uid listed \
                     there"
                ))
            })?;
        if entry.uid == ctx.euid {
            return Ok(None);
        }
        if ctx.euid != 0 {
            return Err(Error::Usage(format!(
                "--user {user}: running the command as another user needs root; run memtrack \
                 with sudo"
            )));
        }
        return Ok(Some(from_entry(ctx, &entry, entry.gid)));
    }
    if ctx.euid != 0 {
        return Ok(None);
    }
    let Some(sudo_uid) = &ctx.sudo_uid else {
        return Ok(None);
    };
    let parse = |var: &str, value: &str| {
        value.parse::<u32>().map_err(|_| {
            Error::Usage(format!(
                "{var}={value} is not a number; unset it, or choose the user with --user NAME"
            ))
        })
    };
    let uid = parse("SUDO_UID", sudo_uid)?;
    if uid == 0 {
        return Ok(None);
    }
    let gid = ctx
        .sudo_gid
        .as_deref()
        .map(|g| parse("SUDO_GID", g))
        .transpose()?;
    match passwd_entries(&ctx.passwd).find(|e| e.uid == uid) {
        Some(e) => {
            let gid = gid.unwrap_or(e.gid);
            Ok(Some(from_entry(ctx, &e, gid)))
        }
        None => {
            let gid = gid.unwrap_or(uid);
            log::warn!(
                "uid {uid} (SUDO_UID) is not in /etc/passwd; the command runs as uid {uid}, \
                 gid {gid}, without supplementary groups, and HOME is left as sudo set it"
            );
            Ok(Some(Identity {
                name: ctx.sudo_user.clone().unwrap_or_else(|| uid.to_string()),
                uid,
                gid,
                groups: vec![gid],
                home: None,
            }))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PASSWD: &str = "root:x:0:0:root:/root:/bin/bash\n\
                          # a comment\n\
                          nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n\
                          alice:x:1000:1000:Alice,,,:/home/alice:/bin/bash\n\
                          broken:x:notanumber:1:::\n";
    const GROUP: &str = "root:x:0:\n\
                         adm:x:4:syslog,alice\n\
                         alice:x:1000:\n\
                         docker:x:998:bob, alice\n\
                         other:x:50:bob\n";

    fn ctx(euid: u32, sudo_uid: Option<&str>, sudo_gid: Option<&str>) -> Context {
        Context {
            euid,
            sudo_uid: sudo_uid.map(String::from),
            sudo_gid: sudo_gid.map(String::from),
            sudo_user: Some("alice".into()),
            passwd: PASSWD.into(),
            group: GROUP.into(),
        }
    }

    #[test]
    fn sudo_runs_the_command_as_the_invoking_user() {
        let id = resolve(None, &ctx(0, Some("1000"), Some("1000")))
            .unwrap()
            .unwrap();
        assert_eq!(id.name, "alice");
        assert_eq!((id.uid, id.gid), (1000, 1000));
        assert_eq!(id.groups, vec![1000, 4, 998]);
        assert_eq!(id.home, Some(PathBuf::from("/home/alice")));
    }

    #[test]
    fn sudo_gid_wins_over_the_passwd_group() {
        let id = resolve(None, &ctx(0, Some("1000"), Some("4")))
            .unwrap()
            .unwrap();
        assert_eq!(id.gid, 4);
        assert_eq!(id.groups, vec![4, 998]);
    }

    #[test]
    fn root_without_sudo_or_sudo_from_root_stays_root() {
        assert_eq!(resolve(None, &ctx(0, None, None)).unwrap(), None);
        assert_eq!(resolve(None, &ctx(0, Some("0"), Some("0"))).unwrap(), None);
    }

    #[test]
    fn not_root_means_no_switch() {
        assert_eq!(resolve(None, &ctx(1000, Some("1000"), None)).unwrap(), None);
        assert_eq!(
            resolve(Some("alice"), &ctx(1000, None, None)).unwrap(),
            None
        );
    }

    #[test]
    fn user_flag_overrides_sudo() {
        let id = resolve(Some("nobody"), &ctx(0, Some("1000"), Some("1000")))
            .unwrap()
            .unwrap();
        assert_eq!((id.uid, id.gid), (65534, 65534));
        assert_eq!(id.groups, vec![65534]);
        let by_uid = resolve(Some("65534"), &ctx(0, None, None))
            .unwrap()
            .unwrap();
        assert_eq!(by_uid, id);
        assert_eq!(
            resolve(Some("root"), &ctx(0, Some("1000"), None)).unwrap(),
            None
        );
    }

    #[test]
    fn unknown_user_and_bad_numbers_are_usage_errors() {
        let e = resolve(Some("mallory"), &ctx(0, None, None)).unwrap_err();
        assert!(
            e.to_string().starts_with("--user mallory: no such user"),
            "{e}"
        );
        let e = resolve(None, &ctx(0, Some("x1"), None)).unwrap_err();
        assert!(e.to_string().contains("SUDO_UID=x1 is not a number"), "{e}");
        let e = resolve(Some("nobody"), &ctx(1000, None, None)).unwrap_err();
        assert!(e.to_string().contains("needs root"), "{e}");
    }

    #[test]
    fn a_sudo_user_missing_from_passwd_keeps_uid_and_gid() {
        let id = resolve(None, &ctx(0, Some("4242"), Some("4243")))
            .unwrap()
            .unwrap();
        assert_eq!(
            (id.uid, id.gid, id.groups.clone()),
            (4242, 4243, vec![4243])
        );
        assert_eq!(id.name, "alice");
        assert_eq!(id.home, None);
    }
}
