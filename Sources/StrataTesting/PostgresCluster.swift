import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A throwaway PostgreSQL server for sync tests and benchmarks: a cluster
/// made by `initdb` in a temporary directory and started by `pg_ctl`, on a
/// Unix socket in that directory and on a free loopback port. PostgreSQL
/// refuses to run as root, so under root the cluster belongs to `nobody`
/// and its programs run through `setpriv`.
///
/// The superuser is `strata`. Over the socket it logs in without a
/// password; over TCP it needs ``password`` (SCRAM), so that a test can
/// see a login refused.
public final class PostgresCluster: @unchecked Sendable {
    /// The cluster's directory: `data/`, the socket and `server.log`.
    public let directory: String
    /// The directory of the Unix socket (`.s.PGSQL.<port>`).
    public var socketDirectory: String { directory }
    /// The loopback port.
    public let port: Int
    /// The superuser's name.
    public let user = "strata"
    /// The superuser's password over TCP.
    public let password = "strata-test-password"
    /// The database to use.
    public let database = "postgres"
    private let bin: String
    private let asNobody: Bool

    /// Why a cluster could not start: the command and what it printed.
    public struct Failure: Error, CustomStringConvertible {
        /// What failed, with the program's output.
        public let description: String
        /// A failure described by `description`.
        public init(description: String) { self.description = description }
    }

    /// The authority that signed the server's certificate (PEM), for a
    /// cluster made with `tls`.
    public var rootCertificate: String { directory + "/ca.pem" }

    /// Makes and starts a cluster. `durable` keeps PostgreSQL's fsync on
    /// (benchmarks); tests run without it. With `tls`, the server has a
    /// certificate for `localhost` and 127.0.0.1 signed by a throwaway
    /// authority (``rootCertificate``), and takes TCP logins over TLS only.
    public init(durable: Bool = false, tls: Bool = false) throws {
        bin = try Self.binaries()
        asNobody = geteuid() == 0
        let made = TemporaryDirectory(prefix: "strata-pg")
        directory = made.path
        port = try Self.freePort()
        if asNobody {
            try Self.run("/bin/chown", ["65534:65534", directory])
        }
        try runAsOwner("\(bin)/initdb", ["-D", directory + "/data", "-U", user, "-A", "trust", "-E", "UTF8", "--no-sync"])
        var settings = """
            listen_addresses = '127.0.0.1'
            port = \(port)
            unix_socket_directories = '\(directory)'
            max_connections = 100
            password_encryption = 'scram-sha-256'

            """
        if !durable { settings += "fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n" }
        if tls {
            try makeCertificates()
            settings += "ssl = on\nssl_cert_file = '\(directory)/server.crt'\nssl_key_file = '\(directory)/server.key'\n"
        }
        let conf = directory + "/data/postgresql.conf"
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: conf))
        handle.seekToEndOfFile()
        handle.write(Data(settings.utf8))
        try handle.close()
        try """
        local all all trust
        \(tls ? "hostssl" : "host") all all 127.0.0.1/32 scram-sha-256

        """.write(toFile: directory + "/data/pg_hba.conf", atomically: true, encoding: .utf8)
        if asNobody { try Self.run("/bin/chown", ["-R", "65534:65534", directory]) }
        try start()
        try psql("ALTER ROLE \(user) PASSWORD '\(password)'")
    }

    deinit { destroy() }

    /// A throwaway authority and the server's key and certificate, signed
    /// by it, in the cluster's directory.
    private func makeCertificates() throws {
        let openssl = "/usr/bin/openssl"
        let dir = directory
        try Self.run(
            openssl,
            [
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=Strata test authority",
                "-keyout", dir + "/ca.key", "-out", dir + "/ca.pem",
            ])
        try Self.run(
            openssl,
            [
                "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost", "-keyout", dir + "/server.key", "-out",
                dir + "/server.csr",
            ])
        try "subjectAltName = DNS:localhost, IP:127.0.0.1\n".write(
            toFile: dir + "/server.ext", atomically: true, encoding: .utf8)
        try Self.run(
            openssl,
            [
                "x509", "-req", "-in", dir + "/server.csr", "-CA", dir + "/ca.pem", "-CAkey", dir + "/ca.key",
                "-CAcreateserial", "-days", "2", "-extfile", dir + "/server.ext", "-out", dir + "/server.crt",
            ])
        try Self.run("/bin/chmod", ["600", dir + "/server.key"])
    }

    /// Starts the server (after ``stop()``); returns once it takes
    /// connections.
    public func start() throws {
        try runAsOwner("\(bin)/pg_ctl", ["-D", directory + "/data", "-l", directory + "/server.log", "-w", "-t", "60", "start"])
    }

    /// Stops the server (fast shutdown: connections are cut).
    public func stop() throws {
        try runAsOwner("\(bin)/pg_ctl", ["-D", directory + "/data", "-w", "-m", "fast", "stop"])
    }

    /// Stops the server and removes the cluster's files.
    public func destroy() {
        _ = try? runAsOwner("\(bin)/pg_ctl", ["-D", directory + "/data", "-w", "-m", "immediate", "stop"])
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Runs `sql` through `psql` over the socket, logged in as `role` (the
    /// superuser by default) to `database` (``database`` by default);
    /// returns what it printed (unaligned, tuples only). Each further
    /// statement of `then` runs after it in the same session (`psql -c`
    /// once each), and notifications that arrived are printed after each.
    @discardableResult
    public func psql(_ sql: String, as role: String? = nil, in database: String? = nil, then: [String] = []) throws
        -> String
    {
        try runAsOwner(
            "\(bin)/psql",
            [
                "-h", directory, "-p", "\(port)", "-U", role ?? user, "-d", database ?? self.database, "-v", "ON_ERROR_STOP=1",
                "-At",
            ]
                + ([sql] + then).flatMap { ["-c", $0] })
    }

    /// A `postgres://` URL of the server over TCP (the password apart).
    public var url: String { "postgres://\(user)@127.0.0.1:\(port)/\(database)?sslmode=disable" }

    @discardableResult
    private func runAsOwner(_ program: String, _ arguments: [String]) throws -> String {
        if asNobody {
            return try Self.run(
                "/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", "--", program] + arguments)
        }
        return try Self.run(program, arguments)
    }

    /// Runs `program`; returns what it printed. It is spawned and reaped
    /// here (`posix_spawn`, `waitpid`), and its output goes to a file: a
    /// server that `pg_ctl` starts keeps a pipe open after `pg_ctl` exits.
    @discardableResult
    private static func run(_ program: String, _ arguments: [String]) throws -> String {
        let outputPath = "/tmp/strata-pg-output-\(UUID().uuidString)"
        defer { unlink(outputPath) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        let argv = ([program] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid = pid_t()
        let spawned = posix_spawn(&pid, program, &actions, nil, argv, environ)
        guard spawned == 0 else { throw Failure(description: "\(program) did not start: errno \(spawned)") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            guard errno == EINTR else { throw Failure(description: "waitpid: errno \(errno)") }
        }
        let text = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
        // Exited normally with status 0.
        guard status & 0x7f == 0, (status >> 8) & 0xff == 0 else {
            throw Failure(description: "\(program) \(arguments.joined(separator: " ")) failed (wait status \(status)): \(text)")
        }
        return text
    }

    /// The newest installed PostgreSQL's programs (Debian puts them in
    /// /usr/lib/postgresql/<version>/bin).
    private static func binaries() throws -> String {
        let root = "/usr/lib/postgresql"
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).compactMap(Int.init).sorted()
        guard let newest = versions.last,
            FileManager.default.isExecutableFile(atPath: "\(root)/\(newest)/bin/initdb")
        else {
            throw Failure(
                description: "no PostgreSQL server in \(root) (Debian's postgresql package; .ci/run installs it)")
        }
        return "\(root)/\(newest)/bin"
    }

    /// A loopback port nothing listens on now.
    private static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket: errno \(errno)") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else { throw Failure(description: "bind: errno \(errno)") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
