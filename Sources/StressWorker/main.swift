// strata-stress-worker ROLE PATH ID OUTPUT
//
// A helper for the multi-process tests: one process of a crowd working on
// one store, killed and restarted at random by the test.
//
// - `transfer`: moves amounts between accounts (tree "accounts"), one
//   durable write transaction each, recording every transfer in tree
//   "ledger" and the count in tree "meta"; after each commit returns it
//   appends the transfer's ledger key to OUTPUT. Exits with status 3 when
//   a snapshot lacks its own last commit.
// - `read`: checks in every snapshot that the balances still add up and
//   that the ledger holds as many transfers as "meta" counts; appends
//   "ok N" to OUTPUT now and then, and exits with status 3 on a violation.
// - `checkpoint`: checkpoints in a loop.
import StrataEngine

#if canImport(Glibc)
    import Glibc
#endif

let accountCount = 32
let initialBalance: Int64 = 1000

func accountKey(_ i: Int) -> [UInt8] { Array("acct\(i)".utf8) }

func encode(_ value: Int64) -> [UInt8] {
    withUnsafeBytes(of: value.bigEndian) { Array($0) }
}

func decode(_ bytes: [UInt8]?) -> Int64? {
    guard let bytes, bytes.count == 8 else { return nil }
    return bytes.reduce(0) { $0 << 8 | Int64($1) }
}

/// Appends `line` to the file at `path` (the test reads it at the end; a
/// killed process leaves at most a partial last line).
func append(_ line: String, to fd: Int32) {
    var text = line + "\n"
    text.withUTF8 { _ = write(fd, $0.baseAddress, $0.count) }
}

func fail(_ text: String, status: Int32 = 1) -> Never {
    var line = "strata-stress-worker: " + text + "\n"
    line.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
    exit(status)
}

let arguments = CommandLine.arguments
guard arguments.count == 5, let id = Int(arguments[3]) else {
    fail("usage: strata-stress-worker transfer|read|checkpoint PATH ID OUTPUT", status: 2)
}
let role = arguments[1]
let path = arguments[2]
let output = open(arguments[4], O_WRONLY | O_CREAT | O_APPEND, 0o644)
guard output >= 0 else { fail("cannot open \(arguments[4])") }

var options = DatabaseOptions(durability: id % 2 == 0 ? .full : .normal)
options.checkpointThresholdFrames = 48
options.busyTimeout = .seconds(60)
options.readOnly = role == "read"

do {
    let db = try Database.open(path: path, options: options)
    var random = SystemRandomNumberGenerator()
    switch role {
    case "transfer":
        // This worker's counter as its last commit left it: the next
        // transaction must read exactly that (an older value is a lost
        // commit; no other worker writes this counter).
        var committed: Int64?
        while true {
            let (key, n): (String, Int64) = try db.write { tx in
                let accounts = try tx.tree("accounts")
                let ledger = try tx.tree("ledger")
                let meta = try tx.tree("meta")
                let counterKey = Array("next-\(id)".utf8)
                let n = decode(try tx.get(counterKey, in: meta)) ?? 0
                if let committed, n != committed {
                    fail("counter next-\(id) reads \(n) after this worker's commit set it to \(committed)", status: 3)
                }
                let from = Int.random(in: 0..<accountCount, using: &random)
                let to = (from + Int.random(in: 1..<accountCount, using: &random)) % accountCount
                let amount = Int64.random(in: 1...50, using: &random)
                guard let a = decode(try tx.get(accountKey(from), in: accounts)),
                    let b = decode(try tx.get(accountKey(to), in: accounts))
                else { fail("an account is missing") }
                try tx.put(accountKey(from), encode(a - amount), in: accounts)
                try tx.put(accountKey(to), encode(b + amount), in: accounts)
                let key = "\(id)-\(n)"
                guard try tx.get(Array(key.utf8), in: ledger) == nil else {
                    fail("ledger entry \(key) exists before the transfer that writes it", status: 3)
                }
                try tx.put(Array(key.utf8), encode(amount), in: ledger)
                try tx.put(counterKey, encode(n + 1), in: meta)
                let total = decode(try tx.get(Array("transfers".utf8), in: meta)) ?? 0
                try tx.put(Array("transfers".utf8), encode(total + 1), in: meta)
                return (key, n)
            }
            committed = n + 1
            append(key, to: output)
        }
    case "read":
        var reads = 0
        while true {
            try db.read { tx in
                let accounts = try tx.tree("accounts")
                var sum: Int64 = 0
                for i in 0..<accountCount {
                    guard let balance = decode(try tx.get(accountKey(i), in: accounts)) else {
                        fail("account \(i) missing in a snapshot", status: 3)
                    }
                    sum += balance
                }
                guard sum == Int64(accountCount) * initialBalance else {
                    fail("balances add up to \(sum) in a snapshot", status: 3)
                }
                let transfers = decode(try tx.get(Array("transfers".utf8), in: try tx.tree("meta"))) ?? 0
                let entries = try tx.count(try tx.tree("ledger"))
                guard Int64(entries) == transfers else {
                    fail("the ledger holds \(entries) transfers, meta counts \(transfers)", status: 3)
                }
            }
            reads += 1
            if reads % 200 == 0 { append("ok \(reads)", to: output) }
        }
    case "checkpoint":
        while true {
            do {
                try db.checkpoint()
            } catch StorageError.busy {
                continue
            }
            usleep(2000)
        }
    default:
        fail("unknown role \(role)", status: 2)
    }
} catch {
    fail("\(error)")
}
