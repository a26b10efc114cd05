//! The flags of Helm 3.18's commands as `helm <cmd> --help` lists them (global flags
//! included), for [`super::flags`]: a flag not listed here fails like real Helm
//! (`Error: unknown flag: --foo`). Note Helm's `--history-max` (there is no `--max-history`).

use super::flags::{self, Flag};

/// Helm's persistent (global) flags.
pub(super) const GLOBAL: &[Flag] = &[
    flags::value("namespace").short('n'),
    flags::value("kubeconfig"),
    flags::value("kube-context"),
    flags::value("kube-apiserver"),
    flags::value("kube-token"),
    flags::value("kube-as-user"),
    flags::value("kube-as-group"),
    flags::value("kube-ca-file"),
    flags::value("kube-tls-server-name"),
    flags::boolean("kube-insecure-skip-tls-verify"),
    flags::value("burst-limit"),
    flags::value("qps"),
    flags::boolean("debug"),
    flags::value("registry-config"),
    flags::value("repository-cache"),
    flags::value("repository-config"),
    flags::boolean("help").short('h'),
];

/// Flags of `install` and `upgrade` (Helm 3.18).
const INSTALL_UPGRADE: &[Flag] = &[
    flags::boolean("atomic"),
    flags::value("ca-file"),
    flags::value("cert-file"),
    flags::value("key-file"),
    flags::value("keyring"),
    flags::boolean("create-namespace"),
    flags::boolean("dependency-update"),
    flags::value("description"),
    flags::boolean("devel"),
    flags::boolean("disable-openapi-validation"),
    flags::optional("dry-run", "client"),
    flags::boolean("enable-dns"),
    flags::boolean("force"),
    flags::boolean("hide-notes"),
    flags::boolean("hide-secret"),
    flags::boolean("insecure-skip-tls-verify"),
    flags::value("labels").short('l'),
    flags::boolean("no-hooks"),
    flags::value("output").short('o'),
    flags::boolean("pass-credentials"),
    flags::value("password"),
    flags::value("username"),
    flags::boolean("plain-http"),
    flags::value("post-renderer"),
    flags::value("post-renderer-args"),
    flags::boolean("render-subchart-notes"),
    flags::value("repo"),
    flags::value("set"),
    flags::value("set-file"),
    flags::value("set-json"),
    flags::value("set-literal"),
    flags::value("set-string"),
    flags::boolean("skip-crds"),
    flags::boolean("skip-schema-validation"),
    flags::boolean("take-ownership"),
    flags::value("timeout"),
    flags::value("values").short('f'),
    flags::boolean("verify"),
    flags::value("version"),
    flags::boolean("wait"),
    flags::boolean("wait-for-jobs"),
];

const UPGRADE_ONLY: &[Flag] = &[
    flags::boolean("cleanup-on-fail"),
    flags::value("history-max"),
    flags::boolean("install").short('i'),
    flags::boolean("reset-values"),
    flags::boolean("reuse-values"),
    flags::boolean("reset-then-reuse-values"),
];

const INSTALL_ONLY: &[Flag] = &[
    flags::boolean("generate-name").short('g'),
    flags::value("name-template"),
    flags::boolean("replace"),
];

/// `template`'s own flags; it also has all of install's (Helm 3.18 `addInstallFlags`).
const TEMPLATE_ONLY: &[Flag] = &[
    flags::value("api-versions").short('a'),
    flags::boolean("include-crds"),
    flags::boolean("is-upgrade"),
    flags::value("kube-version"),
    flags::value("output-dir"),
    flags::boolean("release-name"),
    flags::value("show-only").short('s'),
    flags::boolean("skip-tests"),
    flags::boolean("validate"),
];

const UNINSTALL: &[Flag] = &[
    flags::value("cascade"),
    flags::value("description"),
    flags::boolean("dry-run"),
    flags::boolean("ignore-not-found"),
    flags::boolean("keep-history"),
    flags::boolean("no-hooks"),
    flags::value("timeout"),
    flags::boolean("wait"),
];

const STATUS: &[Flag] = &[
    flags::value("output").short('o'),
    flags::value("revision"),
    flags::boolean("show-desc"),
    flags::boolean("show-resources"),
];

const HISTORY: &[Flag] = &[flags::value("max"), flags::value("output").short('o')];

const LIST: &[Flag] = &[
    flags::boolean("all").short('a'),
    flags::boolean("all-namespaces").short('A'),
    flags::boolean("date").short('d'),
    flags::boolean("deployed"),
    flags::boolean("failed"),
    flags::value("filter").short('f'),
    flags::value("max").short('m'),
    flags::boolean("no-headers"),
    flags::value("offset"),
    flags::value("output").short('o'),
    flags::boolean("pending"),
    flags::boolean("reverse").short('r'),
    flags::value("selector").short('l'),
    flags::boolean("short").short('q'),
    flags::boolean("superseded"),
    flags::value("time-format"),
    flags::boolean("uninstalled"),
    flags::boolean("uninstalling"),
];

const VERSION: &[Flag] = &[flags::boolean("short"), flags::value("template")];

/// The flags `helm <cmd>` knows (global ones included); `None` for an unknown command.
pub(super) fn known_flags(cmd: &str) -> Option<Vec<Flag>> {
    let own: Vec<&[Flag]> = match cmd {
        "upgrade" => vec![INSTALL_UPGRADE, UPGRADE_ONLY],
        "install" => vec![INSTALL_UPGRADE, INSTALL_ONLY],
        "template" => vec![INSTALL_UPGRADE, INSTALL_ONLY, TEMPLATE_ONLY],
        "uninstall" | "delete" | "del" | "un" => vec![UNINSTALL],
        "status" => vec![STATUS],
        "history" | "hist" => vec![HISTORY],
        "list" | "ls" => vec![LIST],
        "version" => vec![VERSION],
        _ => return None,
    };
    Some(
        GLOBAL
            .iter()
            .chain(own.into_iter().flatten())
            .copied()
            .collect(),
    )
}
