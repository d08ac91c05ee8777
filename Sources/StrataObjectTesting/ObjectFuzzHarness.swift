import Foundation
import Strata
import StrataEngine
import StrataTesting

// Over 500 lines: one harness that decodes a fuzz input into edits of
// every kind of tree the object layer keeps, then drives every entry point
// over the result; splitting it would scatter one input format.

/// The body of the `fuzz-object-store` target in `Fuzz/`, shared with the
/// tests that replay its corpus and run random edits under `swift test`.
///
/// Each input picks a valid store of the fuzz models (of the current
/// models, or of ``FuzzSchemaV0``, which the current models migrate) and a
/// list of edits (see ``Edit``) made through the engine to a copy of it:
/// values of records, of the stored schema, of unique and plain indexes,
/// of relationship and external-data trees and of the history replaced,
/// damaged, truncated or deleted, keys copied and moved, trees dropped or
/// added, and bytes of the closed file overwritten (page checksums
/// resealed). The `strata` tool's inspector then reads the edited store
/// (schema, history, row counts, record check, dump), a container opens it
/// (migrating it from V0) and a workload runs: fetches of every entity
/// (indexed, range, unindexed and relationship predicates, sorts, limits,
/// prefetching, batches, enumeration), reads of every attribute and
/// relationship, counts, `checkIntegrity()`, history, an update, an
/// insert, upserts and cascading deletes with saves, a rollback, a second
/// context that merges them, and a history deletion.
///
/// Bytes from disk may only ever produce errors (`SwiftDataError`,
/// `StorageError`), which are ignored: a trap is a bug.
public enum ObjectFuzzHarness {
    /// Where the store lives, in a fresh ``MemoryFileSystem`` per input.
    static let path = "/fuzz/objects.store"

    // MARK: - Edits

    /// One edit of the store. Trees are picked by their index among the
    /// store's tree names in byte order (taken again before each edit),
    /// keys by their index in the tree (both modulo their number).
    public enum Edit: Sendable {
        /// The value under the key becomes `value`.
        case replace(tree: Int, key: Int, value: [UInt8])
        /// The key is deleted.
        case delete(tree: Int, key: Int)
        /// `newKey` gets a copy of the key's value.
        case copy(tree: Int, key: Int, to: [UInt8])
        /// The key's value moves to `newKey`.
        case move(tree: Int, key: Int, to: [UInt8])
        /// `bytes` overwrite the value from `offset` (modulo its length
        /// plus one), extending it if needed.
        case overwrite(tree: Int, key: Int, offset: Int, bytes: [UInt8])
        /// The value is cut to `length` (modulo its length plus one).
        case truncate(tree: Int, key: Int, length: Int)
        /// The tree is dropped.
        case dropTree(tree: Int)
        /// An empty tree named `name` is created (nothing if it exists).
        case createTree(name: [UInt8])
        /// After the edits above and a close: `bytes` overwrite the main
        /// file from `offset` (modulo its size), and the checksums of the
        /// pages they touch are recomputed.
        case file(offset: Int, bytes: [UInt8])
        /// `key` is put into the tree with `value`.
        case put(tree: Int, key: [UInt8], value: [UInt8])
    }

    /// The input that makes `edits` to the store of the current models
    /// (`old` false) or to that of ``FuzzSchemaV0``.
    ///
    /// Format: a byte whose low bit picks the store (1: V0), then per edit
    /// an operation byte (modulo 10, in the order of the
    /// cases of ``Edit``), a tree byte, a two-byte big-endian key index, a
    /// payload length (one byte; 255 is followed by a two-byte length) and
    /// the payload. Payloads: `offset`, `length` and the file offset lead
    /// theirs (two, two and three bytes, big-endian); a put's payload is
    /// its key's length, the key and the value. A short input ends the
    /// list; everything is accepted. The empty input is the untouched store
    /// of the current models.
    public static func encode(_ edits: [Edit], old: Bool = false) -> [UInt8] {
        var out: [UInt8] = [old ? 1 : 0]
        func edit(_ op: UInt8, _ tree: Int, _ key: Int, _ payload: [UInt8]) {
            out += [op, UInt8(truncatingIfNeeded: tree), UInt8(truncatingIfNeeded: key >> 8), UInt8(truncatingIfNeeded: key)]
            let length = min(payload.count, 0xFFFF)
            if length < 255 {
                out.append(UInt8(length))
            } else {
                out += [255, UInt8(length >> 8), UInt8(length & 0xFF)]
            }
            out += payload.prefix(length)
        }
        func be(_ value: Int, _ bytes: Int) -> [UInt8] {
            (0..<bytes).map { UInt8(truncatingIfNeeded: value >> (8 * (bytes - 1 - $0))) }
        }
        for e in edits {
            switch e {
            case .replace(let tree, let key, let value): edit(0, tree, key, value)
            case .delete(let tree, let key): edit(1, tree, key, [])
            case .copy(let tree, let key, let to): edit(2, tree, key, to)
            case .move(let tree, let key, let to): edit(3, tree, key, to)
            case .overwrite(let tree, let key, let offset, let bytes): edit(4, tree, key, be(offset, 2) + bytes)
            case .truncate(let tree, let key, let length): edit(5, tree, key, be(length, 2))
            case .dropTree(let tree): edit(6, tree, 0, [])
            case .createTree(let name): edit(7, 0, 0, name)
            case .file(let offset, let bytes): edit(8, 0, 0, be(offset, 3) + bytes)
            case .put(let tree, let key, let value): edit(9, tree, 0, [UInt8(truncatingIfNeeded: key.count)] + key + value)
            }
        }
        return out
    }

    /// The store and the edits `bytes` encode (see ``encode(_:old:)``).
    static func decode(_ bytes: [UInt8]) -> (old: Bool, edits: [Edit]) {
        var edits: [Edit] = []
        var i = 1
        func int(_ slice: ArraySlice<UInt8>) -> Int { slice.reduce(0) { $0 << 8 | Int($1) } }
        while i + 5 <= bytes.count {
            let op = bytes[i] % 10
            let tree = Int(bytes[i + 1])
            let key = int(bytes[i + 2..<i + 4])
            var length = Int(bytes[i + 4])
            i += 5
            if length == 255 {
                guard i + 2 <= bytes.count else { break }
                length = int(bytes[i..<i + 2])
                i += 2
            }
            let payload = Array(bytes[i..<min(bytes.count, i + length)])
            i += length
            func split(_ n: Int) -> (Int, [UInt8]) { (int(payload.prefix(n)[...]), Array(payload.dropFirst(n))) }
            switch op {
            case 0: edits.append(.replace(tree: tree, key: key, value: payload))
            case 1: edits.append(.delete(tree: tree, key: key))
            case 2: edits.append(.copy(tree: tree, key: key, to: payload))
            case 3: edits.append(.move(tree: tree, key: key, to: payload))
            case 4:
                let (offset, rest) = split(2)
                edits.append(.overwrite(tree: tree, key: key, offset: offset, bytes: rest))
            case 5: edits.append(.truncate(tree: tree, key: key, length: split(2).0))
            case 6: edits.append(.dropTree(tree: tree))
            case 7: edits.append(.createTree(name: payload))
            case 8:
                let (offset, rest) = split(3)
                edits.append(.file(offset: offset, bytes: rest))
            default:
                let keyLength = payload.isEmpty ? 0 : min(Int(payload[0]), payload.count - 1)
                edits.append(
                    .put(
                        tree: tree, key: Array(payload.dropFirst().prefix(keyLength)),
                        value: Array(payload.dropFirst(1 + keyLength))))
            }
        }
        return (bytes.first.map { $0 & 1 == 1 } ?? false, edits)
    }

    /// The main file of `image` with `edits` made.
    static func apply(_ edits: [Edit], to image: Base) -> [UInt8] {
        guard !edits.isEmpty else { return image.main }
        let fs = fileSystem(with: image.main)
        var fileEdits: [(offset: Int, bytes: [UInt8])] = []
        var treeEdits: [Edit] = []
        for edit in edits {
            if case .file(let offset, let bytes) = edit {
                fileEdits.append((offset, bytes))
            } else {
                treeEdits.append(edit)
            }
        }
        if !treeEdits.isEmpty, let db = try? Database.open(path: path, fileSystem: fs) {
            // One transaction for all the edits; if one is refused (an
            // overlong key, say), which fails the transaction, one
            // transaction per edit, so that only that edit is lost.
            do {
                try db.write { tx in
                    for edit in treeEdits { try make(edit, in: tx) }
                }
            } catch {
                for edit in treeEdits { _ = try? db.write { tx in try make(edit, in: tx) } }
            }
            try? db.close()
        }
        var main = fs.file(path)?.withContents { $0 } ?? image.main
        for (offset, bytes) in fileEdits where !main.isEmpty && !bytes.isEmpty {
            let start = offset % main.count
            let end = min(main.count, start + bytes.count)
            main.replaceSubrange(start..<end, with: bytes.prefix(end - start))
            for page in start / image.pageSize...(end - 1) / image.pageSize where (page + 1) * image.pageSize <= main.count {
                PageBytes.resealChecksum(&main, page: page, pageSize: image.pageSize)
            }
        }
        return main
    }

    private static func make(_ edit: Edit, in tx: WriteTransaction) throws {
        let names = try tx.treeNames()
        func tree(_ index: Int) throws -> Tree? { names.isEmpty ? nil : try tx.tree(names[index % names.count]) }
        /// The tree and the key at `key` in it (nil when it is empty).
        func entry(_ treeIndex: Int, _ key: Int) throws -> (Tree, [UInt8], [UInt8])? {
            guard let tree = try tree(treeIndex) else { return nil }
            let count = try tx.count(tree)
            guard count > 0 else { return nil }
            let cursor = try tx.cursor(tree)
            var more = try cursor.first()
            for _ in 0..<key % count where more { more = try cursor.next() }
            guard more else { return nil }
            return (tree, try cursor.key(), try cursor.value())
        }
        switch edit {
        case .replace(let t, let k, let value):
            guard let (tree, key, _) = try entry(t, k) else { return }
            try tx.put(key, value, in: tree)
        case .delete(let t, let k):
            guard let (tree, key, _) = try entry(t, k) else { return }
            try tx.delete(key, in: tree)
        case .copy(let t, let k, let to):
            guard let (tree, _, value) = try entry(t, k) else { return }
            try tx.put(to, value, in: tree)
        case .move(let t, let k, let to):
            guard let (tree, key, value) = try entry(t, k) else { return }
            try tx.delete(key, in: tree)
            try tx.put(to, value, in: tree)
        case .overwrite(let t, let k, let offset, let bytes):
            guard let (tree, key, value) = try entry(t, k) else { return }
            var new = value
            let start = offset % (value.count + 1)
            new.replaceSubrange(start..<min(value.count, start + bytes.count), with: bytes)
            try tx.put(key, new, in: tree)
        case .truncate(let t, let k, let length):
            guard let (tree, key, value) = try entry(t, k) else { return }
            try tx.put(key, Array(value.prefix(length % (value.count + 1))), in: tree)
        case .dropTree(let t):
            guard !names.isEmpty else { return }
            try tx.dropTree(names[t % names.count])
        case .createTree(let name):
            try tx.createTree(String(decoding: name, as: UTF8.self))
        case .put(let t, let key, let value):
            guard let tree = try tree(t) else { return }
            try tx.put(key, value, in: tree)
        case .file:
            break
        }
    }

    // MARK: - The harness

    /// Makes the edits `bytes` encode to the store it picks, inspects the
    /// result, opens a container on it and runs the workload. Errors are
    /// ignored; only a trap fails.
    public static func objectStore(_ bytes: [UInt8]) {
        let (old, edits) = decode(bytes)
        let fs = fileSystem(with: apply(edits, to: old ? oldBase : base))
        var sink = Sink()
        inspect(fs, into: &sink)
        exercise(fs, into: &sink)
        sink.finish()
        cutCycles(sink.models)
    }

    /// What the `strata` tool shows and checks of the store in `fs`.
    static func inspect(_ fs: MemoryFileSystem, into sink: inout Sink) {
        guard let db = try? Database.open(path: path, fileSystem: fs) else { return sink.add(-1) }
        _ = try? db.read { tx in
            sink.add(((try? StoreInspector.schemaText(tx)) ?? nil)?.count ?? -1)
            sink.add((try? StoreInspector.historyText(tx))?.count ?? -1)
            sink.add((try? StoreInspector.rowCounts(tx))?.reduce(0) { $0 &+ $1.rows } ?? -1)
            sink.add((try? StoreInspector.checkRecords(tx, limit: 40))?.count ?? -1)
            var lines = 0
            try? StoreInspector.dump(tx, entity: nil, json: true) { lines &+= $0.utf8.count }
            try? StoreInspector.dump(tx, entity: "FuzzOwner", json: false) { lines &+= $0.utf8.count }
            sink.add(lines)
        }
        try? db.close()
    }

    /// The fuzz models' schema.
    static var schema: Schema { Schema([FuzzOwner.self, FuzzItem.self, FuzzProfile.self, FuzzTag.self]) }

    static func configuration(_ fs: MemoryFileSystem) -> ModelConfiguration {
        ModelConfiguration(url: URL(fileURLWithPath: path), fileSystem: fs)
    }

    /// The workload on the store in `fs`.
    static func exercise(_ fs: MemoryFileSystem, into sink: inout Sink) {
        guard let container = try? ModelContainer(for: schema, configurations: [configuration(fs)]) else { return }
        let a = ModelContext(container)
        let b = ModelContext(container)

        // Context B holds models from before A's saves, merged afterwards.
        let early = (try? b.fetch(FetchDescriptor<FuzzOwner>(sortBy: [SortDescriptor(\.email)]))) ?? []
        for owner in early { sink.read(owner) }
        let earlyTags = (try? b.fetch(FetchDescriptor<FuzzTag>())) ?? []
        for tag in earlyTags { sink.read(tag) }

        fetchEverything(a, into: &sink)
        sink.add((try? container.checkIntegrity())?.count ?? -1)
        readHistory(a, into: &sink)

        // An update of every kind of field and relationship.
        let owners = (try? a.fetch(FetchDescriptor<FuzzOwner>(sortBy: [SortDescriptor(\.age)]))) ?? []
        let tags = (try? a.fetch(FetchDescriptor<FuzzTag>(sortBy: [SortDescriptor(\.label)]))) ?? []
        if let owner = owners.first {
            owner.age += 1
            owner.name = "renamed"
            owner.nickname = owner.nickname == nil ? "now named" : nil
            owner.home.x += 1
            owner.status = .archived
            owner.avatar = Data(repeating: 0x61, count: 300)
            owner.items.first?.done.toggle()
            owner.items.last?.owner = owners.last
            owner.profile?.bio += "!"
            if let tag = tags.first { owner.tags.append(tag) }
            if owner.tags.count > 1 { owner.tags.removeFirst() }
        }
        if let tag = tags.last { tag.weight = (tag.weight ?? 0) + 1 }
        try? a.save()

        // An insert with each relationship, and upserts (a stored unique
        // value) of an owner and a tag.
        let fresh = FuzzOwner(seed: 1_000)
        fresh.avatar = Data((0..<5_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        a.insert(fresh)
        fresh.items = [FuzzItem(title: "fresh", rank: 99)]
        fresh.profile = FuzzProfile(bio: "fresh")
        fresh.tags = [FuzzTag(label: "tag-1", weight: nil), FuzzTag(label: "fresh", weight: 2)]
        let twin = FuzzOwner(seed: 2)
        a.insert(twin)
        twin.tags = tags.suffix(2)
        try? a.save()
        sink.add(fresh.items.count + fresh.tags.count)
        sink.models += owners + tags + [fresh, twin]

        // Changes rolled back: the models reload what is stored.
        if let owner = owners.dropFirst().first {
            owner.email = "rolled back"
            owner.items.first?.rank = -1
            owner.tags = []
        }
        a.rollback()
        if let owner = owners.dropFirst().first { sink.read(owner) }

        // Deletes: an owner (cascading to its items and profile), a tag
        // (nullifying the many-to-many), items by predicate.
        if let doomed = owners.last { a.delete(doomed) }
        if tags.count > 1 { a.delete(tags[1]) }
        try? a.delete(model: FuzzItem.self, where: #Predicate { $0.rank > 40 })
        try? a.save()

        // B merges A's saves, reads what it holds, and saves a change.
        b.processPendingChanges()
        for owner in early { sink.read(owner) }
        for tag in earlyTags { sink.read(tag) }
        if let owner = early.first {
            owner.score += 1
            owner.items.append(FuzzItem(title: "from b", rank: 7))
        }
        if let owner = early.last { b.delete(owner) }
        try? b.save()
        a.processPendingChanges()
        fetchEverything(b, into: &sink)
        sink.add((try? container.checkIntegrity())?.count ?? -1)
        readHistory(b, into: &sink)

        // The history before the second transaction goes.
        if let second = (try? b.fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>()))?.dropFirst().first?.token {
            try? b.deleteHistory(HistoryDescriptor<DefaultHistoryTransaction>(predicate: #Predicate { $0.token < second }))
            readHistory(a, into: &sink)
        }
    }

    /// Fetches each entity in many ways and reads everything fetched.
    static func fetchEverything(_ context: ModelContext, into sink: inout Sink) {
        func fetch<T: PersistentModel>(_ descriptor: FetchDescriptor<T>, _ read: (T, inout Sink) -> Void) {
            guard let models = try? context.fetch(descriptor) else { return sink.add(-1) }
            for model in models { read(model, &sink) }
            sink.add((try? context.fetchCount(descriptor)) ?? -1)
        }
        let readOwner: (FuzzOwner, inout Sink) -> Void = { $1.read($0) }
        let name = "owner-3"
        let email = "o5@example.com"
        let active = FuzzStatus.active
        fetch(FetchDescriptor<FuzzOwner>(), readOwner)
        fetch(FetchDescriptor<FuzzOwner>(predicate: #Predicate { $0.name == name }), readOwner)
        fetch(FetchDescriptor<FuzzOwner>(predicate: #Predicate { $0.email == email }), readOwner)
        var range = FetchDescriptor<FuzzOwner>(
            predicate: #Predicate { $0.age >= 30 && $0.age < 60 }, sortBy: [SortDescriptor(\.age, order: .reverse)])
        range.fetchLimit = 5
        fetch(range, readOwner)
        fetch(
            FetchDescriptor<FuzzOwner>(
                predicate: #Predicate { $0.score > 0 && $0.active }, sortBy: [SortDescriptor(\.name), SortDescriptor(\.joined)]),
            readOwner)
        var page = FetchDescriptor<FuzzOwner>(predicate: #Predicate { $0.nickname != nil }, sortBy: [SortDescriptor(\.score)])
        page.fetchOffset = 2
        page.fetchLimit = 4
        page.relationshipKeyPathsForPrefetching = [\.items, \.profile, \.tags]
        fetch(page, readOwner)
        var partial = FetchDescriptor<FuzzOwner>(predicate: #Predicate { $0.status == active })
        partial.propertiesToFetch = [\.name, \.joined]
        fetch(partial, readOwner)
        fetch(FetchDescriptor<FuzzOwner>(predicate: #Predicate { $0.name.starts(with: "owner-1") && $0.age > 20 }), readOwner)

        let readItem: (FuzzItem, inout Sink) -> Void = { $1.read($0) }
        fetch(FetchDescriptor<FuzzItem>(sortBy: [SortDescriptor(\.due), SortDescriptor(\.title)]), readItem)
        fetch(FetchDescriptor<FuzzItem>(predicate: #Predicate { $0.rank >= 3 && $0.rank <= 20 }), readItem)
        fetch(FetchDescriptor<FuzzItem>(predicate: #Predicate { $0.title.contains("2") || $0.done }), readItem)
        fetch(FetchDescriptor<FuzzItem>(predicate: #Predicate { $0.owner?.name == name }), readItem)

        fetch(FetchDescriptor<FuzzProfile>(sortBy: [SortDescriptor(\.bio, order: .reverse)])) { $1.read($0) }
        let label = "tag-2"
        fetch(FetchDescriptor<FuzzTag>(predicate: #Predicate { $0.label == label })) { $1.read($0) }
        fetch(FetchDescriptor<FuzzTag>(predicate: #Predicate { $0.weight != nil }, sortBy: [SortDescriptor(\.weight)])) {
            $1.read($0)
        }

        if let ids = try? context.fetchIdentifiers(FetchDescriptor<FuzzItem>()) {
            for id in ids.prefix(8) {
                if let item = context.model(for: id) as? FuzzItem { sink.read(item) }
            }
        }
        if let batches = try? context.fetch(FetchDescriptor<FuzzOwner>(), batchSize: 4) {
            for owner in batches.prefix(12) { sink.read(owner) }
        }
        var enumerated: [FuzzItem] = []
        try? context.enumerate(FetchDescriptor<FuzzItem>(predicate: #Predicate { $0.rank < 30 }), batchSize: 5) {
            enumerated.append($0)
        }
        for item in enumerated { sink.read(item) }
    }

    /// Reads every history transaction and change, and the tombstones of
    /// deleted owners.
    static func readHistory(_ context: ModelContext, into sink: inout Sink) {
        guard let history = try? context.fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>()) else {
            return sink.add(-1)
        }
        if let first = history.first?.token {
            let later = try? context.fetchHistory(
                HistoryDescriptor<DefaultHistoryTransaction>(predicate: #Predicate { $0.token > first }))
            sink.add(later?.count ?? -1)
        }
        for transaction in history {
            sink.add(Int(truncatingIfNeeded: transaction.token.tokenValue))
            sink.add(transaction.author?.count ?? 0)
            for change in transaction.changes {
                sink.add(change.changedPersistentIdentifier.hashValue)
                switch change {
                case .delete(let deleted):
                    if let owner = deleted as? DefaultHistoryDelete<FuzzOwner> { sink.add(owner.tombstone[\.name]?.count ?? -1) }
                case .update(let updated):
                    if let owner = updated as? DefaultHistoryUpdate<FuzzOwner> { sink.add(owner.updatedAttributes.count) }
                case .insert:
                    break
                }
            }
        }
    }

    /// Folds everything read into a value the optimizer cannot drop, and
    /// keeps the models read (for ``cutCycles(_:)``).
    struct Sink {
        var value = 0
        var models: [AnyObject] = []

        mutating func add(_ x: Int) { value = value &* 31 &+ x }
        mutating func add(_ x: Double) { add(Int(truncatingIfNeeded: x.bitPattern)) }
        mutating func add(_ s: String) { add(s.utf8.count) }

        mutating func read(_ owner: FuzzOwner) {
            models.append(owner)
            add(owner.name)
            add(owner.email)
            add(owner.age)
            add(owner.score)
            add(owner.joined.timeIntervalSinceReferenceDate)
            add(owner.active ? 1 : 0)
            add(owner.nickname ?? "-")
            add(owner.status.rawValue)
            add(owner.home.x + owner.home.y)
            add(owner.home.label ?? "-")
            add(owner.avatar.count)
            for alias in owner.aliases { add(alias) }
            for item in owner.items { add(item.title) }
            add(owner.profile?.bio ?? "-")
            for tag in owner.tags { add(tag.label) }
            add(owner.persistentModelID.hashValue)
        }

        mutating func read(_ item: FuzzItem) {
            models.append(item)
            add(item.title)
            add(item.rank)
            add(item.done ? 1 : 0)
            add(item.due?.timeIntervalSinceReferenceDate ?? -1)
            add(item.owner?.email ?? "-")
        }

        mutating func read(_ profile: FuzzProfile) {
            models.append(profile)
            add(profile.bio)
            add(profile.owner?.profile?.bio ?? "-")
        }

        mutating func read(_ tag: FuzzTag) {
            models.append(tag)
            add(tag.label)
            add(tag.weight ?? -1)
            for owner in tag.owners { add(owner.name) }
        }

        func finish() { blackHole(value) }
    }

    // MARK: - The base stores

    /// A base store: its closed main file, page size, tree names (in byte
    /// order, the order edits pick from) and entries.
    struct Base: Sendable {
        var main: [UInt8]
        var pageSize: Int
        var trees: [String]
        var entries: [String: [(key: [UInt8], value: [UInt8])]]
    }

    /// The store of the current models and the store of ``FuzzSchemaV0``,
    /// each built once per process, and the same (up to history timestamps)
    /// in every process.
    static let base: Base = makeBase()
    static let oldBase: Base = makeOldBase()

    /// The index of tree `name` of a base store (for seed inputs).
    static func tree(_ name: String, old: Bool = false) -> Int {
        guard let index = (old ? oldBase : base).trees.firstIndex(of: name) else { preconditionFailure("no tree \(name)") }
        return index
    }

    /// Owners 0..<24 (each with zero to three items, every other one with a
    /// profile, avatars empty, small, large and incompressible), eight tags
    /// shared between them, then history: an update, a delete and an
    /// upsert in later saves.
    private static func makeBase() -> Base {
        let fs = MemoryFileSystem()
        do {
            try {
                let container = try ModelContainer(for: schema, configurations: [configuration(fs)])
                let context = ModelContext(container)
                let tags = (0..<8).map { FuzzTag(label: "tag-\($0)", weight: $0 % 3 == 0 ? nil : Double($0) / 2) }
                var random = SeededRandom(seed: 23)
                var owners: [FuzzOwner] = []
                for seed in 0..<24 {
                    let owner = FuzzOwner(seed: seed)
                    owners.append(owner)
                    switch seed % 4 {
                    case 1: owner.avatar = Data(repeating: UInt8(seed), count: 40)
                    case 2: owner.avatar = Data((0..<6_000).map { UInt8(truncatingIfNeeded: $0 / 7) })
                    case 3: owner.avatar = Data(random.bytes(seed == 3 ? 9_000 : 200))
                    default: break
                    }
                    context.insert(owner)
                    owner.items = (0..<seed % 4).map { FuzzItem(title: "item \(seed).\($0)", rank: seed * 2 + $0) }
                    if seed % 2 == 0 { owner.profile = FuzzProfile(bio: "bio of \(seed)") }
                    owner.tags = tags.enumerated().filter { ($0.offset + seed) % 3 == 0 }.map(\.element)
                }
                try context.save()
                let all = try context.fetch(FetchDescriptor<FuzzOwner>(sortBy: [SortDescriptor(\.email)]))
                all[0].age += 1
                all[1].items.first?.title = "renamed"
                try context.save()
                context.delete(all[2])
                try context.save()
                context.insert(FuzzTag(label: "tag-4", weight: 4))
                try context.save()
                let problems = try container.checkIntegrity()
                guard problems.isEmpty else { preconditionFailure("the base store is damaged: \(problems)") }
                cutCycles(owners + tags + all)
            }()
            return try snapshot(fs)
        } catch {
            preconditionFailure("building the object fuzz harness's store failed: \(error)")
        }
    }

    /// Owners 0..<12 of ``FuzzSchemaV0`` with items, profiles and tags, and
    /// an update in a second save.
    private static func makeOldBase() -> Base {
        let fs = MemoryFileSystem()
        do {
            try {
                typealias V0 = FuzzSchemaV0
                let container = try ModelContainer(
                    for: Schema(versionedSchema: V0.self), configurations: [configuration(fs)])
                let context = ModelContext(container)
                let tags = (0..<4).map { V0.FuzzTag(label: "tag-\($0)", weight: Double($0)) }
                var owners: [V0.FuzzOwner] = []
                for seed in 0..<12 {
                    let owner = V0.FuzzOwner(seed: seed)
                    owners.append(owner)
                    context.insert(owner)
                    owner.items = (0..<seed % 3).map { V0.FuzzItem(title: "item \(seed).\($0)", rank: seed * 2 + $0) }
                    if seed % 3 == 0 { owner.profile = V0.FuzzProfile(bio: "bio of \(seed)") }
                    owner.tags = tags.enumerated().filter { ($0.offset + seed) % 2 == 0 }.map(\.element)
                }
                try context.save()
                owners[1].legacy = "changed"
                owners[2].items.first?.done.toggle()
                try context.save()
                let problems = try container.checkIntegrity()
                guard problems.isEmpty else { preconditionFailure("the V0 base store is damaged: \(problems)") }
                cutCycles(owners + tags)
            }()
            return try snapshot(fs)
        } catch {
            preconditionFailure("building the object fuzz harness's V0 store failed: \(error)")
        }
    }

    /// The closed store in `fs` as a base.
    private static func snapshot(_ fs: MemoryFileSystem) throws -> Base {
        let db = try Database.open(path: path, fileSystem: fs)
        var entries: [String: [(key: [UInt8], value: [UInt8])]] = [:]
        let trees = try db.read { tx in
            let names = try tx.treeNames()
            for name in names { entries[name] = try tx.scan(try tx.tree(name)) }
            return names
        }
        let pageSize = db.pageSize
        try db.close()
        guard let main = fs.file(path)?.withContents({ $0 }) else { preconditionFailure("the base store has no file") }
        return Base(main: main, pageSize: pageSize, trees: trees, entries: entries)
    }

    // MARK: - Seeds

    /// The seed corpus of `fuzz-object-store` (written by
    /// `fuzz-make-seeds`): the untouched store, one edit of each kind on
    /// each kind of tree, and random edit lists.
    public static var seeds: [(name: String, input: [UInt8])] {
        func row(_ id: Int) -> [UInt8] { (0..<8).map { UInt8(truncatingIfNeeded: id >> (56 - 8 * $0)) } }
        var seeds: [(name: String, input: [UInt8])] = [
            ("untouched", []),
            ("owner-record-truncated", encode([.truncate(tree: tree("e.FuzzOwner"), key: 3, length: 10)])),
            ("item-record-overwritten", encode([.overwrite(tree: tree("e.FuzzItem"), key: 5, offset: 4, bytes: [0xFF, 0x7F])])),
            ("owner-record-copied-to-new-row", encode([.copy(tree: tree("e.FuzzOwner"), key: 0, to: row(1_000))])),
            ("tag-record-moved-to-row-0", encode([.move(tree: tree("e.FuzzTag"), key: 0, to: row(0))])),
            ("profile-record-short-key", encode([.move(tree: tree("e.FuzzProfile"), key: 1, to: [0, 0, 7])])),
            ("owner-deleted-under-relationships", encode([.delete(tree: tree("e.FuzzOwner"), key: 5)])),
            (
                "schema-entry-overwritten",
                encode([.overwrite(tree: tree("strata.schema"), key: 1, offset: 10, bytes: [0xFF, 0xFF, 0xFF])])
            ),
            ("schema-entry-deleted", encode([.delete(tree: tree("strata.schema"), key: 2)])),
            ("schema-tree-dropped", encode([.dropTree(tree: tree("strata.schema"))])),
            ("item-tree-dropped", encode([.dropTree(tree: tree("e.FuzzItem"))])),
            ("unique-entry-deleted", encode([.delete(tree: tree("u.FuzzOwner.email"), key: 4)])),
            ("unique-entry-other-row", encode([.replace(tree: tree("u.FuzzTag.label"), key: 2, value: row(9_999))])),
            ("index-entry-moved", encode([.move(tree: tree("i.FuzzOwner.age"), key: 3, to: [0x00])])),
            ("index-entry-garbage", encode([.put(tree: tree("i.FuzzItem.rank"), key: [0x30, 0xFF, 0x00, 0x01], value: [9])])),
            ("join-pair-moved", encode([.move(tree: tree("j.FuzzOwner.tags"), key: 3, to: [0x80, 0x01, 0x02])])),
            ("mirror-pair-deleted", encode([.delete(tree: tree("m.FuzzOwner.tags"), key: 7)])),
            ("to-one-index-deleted", encode([.delete(tree: tree("r.FuzzItem.owner"), key: 2)])),
            ("one-to-one-index-copied", encode([.copy(tree: tree("r.FuzzProfile.owner"), key: 0, to: [0x01, 0x02])])),
            (
                "external-data-damaged",
                encode([
                    .overwrite(tree: tree("x.FuzzOwner.avatar"), key: 2, offset: 0, bytes: [1]),
                    .truncate(tree: tree("x.FuzzOwner.avatar"), key: 3, length: 100),
                ])
            ),
            (
                "history-damaged",
                encode([
                    .overwrite(tree: tree("h.transactions"), key: 1, offset: 5, bytes: [0xFF, 0xFF, 0xFF, 0xFF]),
                    // (`h.meta` exists only once history has been deleted.)
                    .truncate(tree: tree("h.transactions"), key: 2, length: 3),
                ])
            ),
            ("catalog-page-overwritten", encode([.file(offset: base.pageSize + 40, bytes: [0xFF, 0xFF, 0xFF, 0xFF])])),
            (
                "unexpected-trees",
                encode([.createTree(name: Array("e.FuzzGhost".utf8)), .createTree(name: Array("x.FuzzOwner.name".utf8))])
            ),
            ("v0-untouched", encode([], old: true)),
            (
                "v0-owner-record-overwritten",
                encode([.overwrite(tree: tree("e.FuzzOwner", old: true), key: 4, offset: 6, bytes: [0x80, 0xFF])], old: true)
            ),
            ("v0-tag-label-duplicated", encode([.copy(tree: tree("e.FuzzTag", old: true), key: 1, to: row(77))], old: true)),
            (
                "v0-schema-entry-truncated",
                encode([.truncate(tree: tree("strata.schema", old: true), key: 1, length: 40)], old: true)
            ),
            ("v0-index-tree-dropped", encode([.dropTree(tree: tree("i.FuzzOwner.fullName", old: true))], old: true)),
        ]
        for i in 0..<8 {
            var random = SeededRandom(seed: UInt64(230 + i))
            seeds.append(("random-\(i)", randomEdits(using: &random)))
        }
        return seeds
    }

    // MARK: - Random edits

    /// Random edit lists for `swift test` (and seed inputs), one in four on
    /// the V0 store: mostly small damage to real values (bit flips,
    /// truncation, 0xFF runs, fields spliced from another value of the
    /// same tree), some deletes, copies and moves of keys, new trees,
    /// dropped trees and file bytes.
    public static func randomEdits(using random: inout SeededRandom) -> [UInt8] {
        let old = Int.random(in: 0..<4, using: &random) == 0
        let image = old ? oldBase : base
        var edits: [Edit] = []
        for _ in 0..<Int.random(in: 1...4, using: &random) {
            let tree = Int.random(in: 0..<image.trees.count, using: &random)
            let entries = image.entries[image.trees[tree]] ?? []
            let key = entries.isEmpty ? 0 : Int.random(in: 0..<entries.count, using: &random)
            let original = entries.isEmpty ? [] : entries[key].value
            switch Int.random(in: 0..<20, using: &random) {
            case 0..<9:
                let donor = entries.isEmpty ? [] : entries[Int.random(in: 0..<entries.count, using: &random)].value
                edits.append(.replace(tree: tree, key: key, value: damage(original, donor: donor, using: &random)))
            case 9, 10:
                edits.append(.delete(tree: tree, key: key))
            case 11:
                let to = entries.isEmpty ? [] : damage(entries[key].key, donor: [], using: &random)
                edits.append(
                    Bool.random(using: &random) ? .copy(tree: tree, key: key, to: to) : .move(tree: tree, key: key, to: to))
            case 12:
                edits.append(.truncate(tree: tree, key: key, length: Int.random(in: 0...0xFFFF, using: &random)))
            case 13:
                edits.append(
                    .overwrite(tree: tree, key: key, offset: Int.random(in: 0...64, using: &random), bytes: random.bytes(4)))
            case 14:
                edits.append(.dropTree(tree: tree))
            case 15:
                let names = ["e.FuzzGhost", "u.FuzzOwner.name", "i.FuzzTag.label", "r.FuzzItem.ghost", "x.FuzzOwner.name"]
                edits.append(.createTree(name: Array(names[Int.random(in: 0..<names.count, using: &random)].utf8)))
            case 16:
                let offset = Int.random(in: 0..<image.main.count, using: &random)
                edits.append(.file(offset: offset, bytes: random.bytes(Int.random(in: 1...8, using: &random))))
            default:
                let source = entries.isEmpty ? [] : entries[Int.random(in: 0..<entries.count, using: &random)].key
                edits.append(.put(tree: tree, key: damage(source, donor: [], using: &random), value: original))
            }
        }
        return encode(edits, old: old)
    }

    /// `bytes` with one to three random changes.
    static func damage(_ bytes: [UInt8], donor: [UInt8], using random: inout SeededRandom) -> [UInt8] {
        var out = bytes
        for _ in 0..<Int.random(in: 1...3, using: &random) {
            let position = out.isEmpty ? 0 : Int.random(in: 0..<out.count, using: &random)
            switch Int.random(in: 0..<6, using: &random) {
            case 0 where !out.isEmpty:
                out[position] ^= 1 << UInt8.random(in: 0..<8, using: &random)
            case 1:
                out.removeSubrange(Int.random(in: 0...out.count, using: &random)...)
            case 2:
                out.insert(UInt8.random(in: 0...255, using: &random), at: Int.random(in: 0...out.count, using: &random))
            case 3 where !out.isEmpty:
                out[position] = [0x00, 0x01, 0x7F, 0x80, 0xFF][Int.random(in: 0..<5, using: &random)]
            case 4 where !donor.isEmpty:
                let start = Int.random(in: 0..<donor.count, using: &random)
                let run = donor[start..<min(donor.count, start + Int.random(in: 1...24, using: &random))]
                out.replaceSubrange(position..<min(out.count, position + run.count), with: run)
            default:
                out.insert(contentsOf: repeatElement(0xFF, count: Int.random(in: 1...11, using: &random)), at: position)
            }
        }
        return out
    }

    // MARK: - Helpers

    /// A fresh in-memory file system holding `main` as the store's file.
    static func fileSystem(with main: [UInt8]) -> MemoryFileSystem {
        let fs = MemoryFileSystem()
        (try? fs.open(path, create: true, readOnly: false))?.close()
        fs.file(path)?.withContents { $0 = main }
        return fs
    }
}

/// Keeps `value` alive past the optimizer.
@inline(never) func blackHole(_ value: Int) {
    if value == 0x5eed_f00d { print("") }
}
