#if Sync
    import Foundation
    import Strata
    import StrataEngine
    @testable import StrataSync
    import StrataTesting
    import XCTest

    /// Three devices make random saves (inserts, attribute changes,
    /// relationship changes, deletes with cascades) and sync at random
    /// points, each one offline for stretches; once all of them sync, every
    /// store holds the same models and passes its integrity check.
    ///
    /// The seed is printed; `STRATA_SYNC_SEED=<seed>` replays a run, and
    /// `STRATA_SYNC_OPERATIONS` sets its length (1,200 by default);
    /// `STRATA_SYNC_COLLISIONS=0` leaves out the renames that collide on a
    /// unique constraint and the slots that collide on a compound one
    /// (`STRATA_SYNC_SLOTS=0` the slots alone),
    /// `STRATA_SYNC_TRIMS=0` leaves the trims out and
    /// `STRATA_SYNC_ATTACHMENTS=0` the external-storage values,
    /// `STRATA_SYNC_TWO_STORES=0` the second store.
    final class SyncConvergenceTests: SyncTestCase {
        override class var models: [any PersistentModel.Type] { [Folder.self, Memo.self, Label.self, Slot.self] }

        func testThreeDevicesConverge() async throws {
            let environment = ProcessInfo.processInfo.environment
            let seed = environment["STRATA_SYNC_SEED"].flatMap(UInt64.init) ?? UInt64.random(in: 1...UInt64.max)
            let operations = environment["STRATA_SYNC_OPERATIONS"].flatMap(Int.init) ?? 1200
            print("SyncConvergenceTests seed \(seed) (STRATA_SYNC_SEED=\(seed) replays it), \(operations) operations")
            try await converge(
                seed: seed, operations: operations, trims: environment["STRATA_SYNC_TRIMS"] != "0",
                collisions: environment["STRATA_SYNC_COLLISIONS"] != "0",
                attachments: environment["STRATA_SYNC_ATTACHMENTS"] != "0",
                twoStores: environment["STRATA_SYNC_TWO_STORES"] != "0")
        }

        /// Seeds that once diverged. 326: a change set sent the insert of a
        /// model a later save made ahead of this device's saves in between.
        /// 2, with trims: restoring a snapshot kept a model the zone had
        /// deleted, because a local update of it waited to be pushed.
        /// 33 and 20, with collisions (before the zone copy): slots merged
        /// ahead of the zone that the zone keeps apart; a device's own
        /// change read from its outbox after a merge readdressed it.
        func testSeedsThatOnceDivergedConverge() async throws {
            try await converge(seed: 326, operations: 200, stores: "seed326-")
            try await converge(seed: 2, operations: 400, stores: "seed2-", trims: true)
            try await converge(
                seed: 33, operations: 1200, stores: "seed33-", trims: true, collisions: true, attachments: true,
                twoStores: true)
            try await converge(
                seed: 20, operations: 1200, stores: "seed20-", trims: true, collisions: true, attachments: true,
                twoStores: true)
        }

        /// `trims`: one sync in ten, from a stream of its own (so that a
        /// seed's other operations stay as they were), trims the zone's
        /// history, and the devices behind restore its snapshot.
        /// `collisions`: half the label renames, from a stream of its own,
        /// take a name of the small pool that this device's labels do not
        /// hold, which another device's label may: an update that collides
        /// on the unique constraint, merged on every device. And a fifth of
        /// the operations, from a stream of their own, also insert, move,
        /// edit or delete a slot of a small grid (`#Unique` on day and
        /// hour): an insert into a cell taken here merges (an upsert), a
        /// move goes to a cell free here, which another device may hold.
        /// `attachments`: a third of the memo renames, from a stream of its
        /// own, also set the memo's `.externalStorage` attachment: nil, one
        /// of three values that many memos share, or bytes of its own (one
        /// in ten over a part, 1 MiB).
        /// `twoStores`: each device's container has a second store of
        /// drafts, synced with a zone of its own by an engine of its own;
        /// a quarter of the operations, from a stream of their own, also
        /// insert, edit or delete a draft in the same save, or sync the
        /// drafts.
        func converge(
            seed: UInt64, operations: Int, stores prefix: String = "", trims: Bool = false, collisions: Bool = false,
            attachments: Bool = false, twoStores: Bool = false
        ) async throws {
            let environment = ProcessInfo.processInfo.environment
            var random = SeededRandom(seed: seed)
            var trimming = SeededRandom(seed: seed ^ 0x5bd1_e995)
            var colliding = SeededRandom(seed: seed ^ 0x2f6b_41c3)
            var attaching = SeededRandom(seed: seed ^ 0x7a3d_9c21)
            func attachment() -> Data? {
                switch Int.random(in: 0..<10, using: &attaching) {
                case 0..<2: return nil
                case 2..<5: return Data(repeating: UInt8(Int.random(in: 0..<3, using: &attaching)), count: 5000)
                case 5:
                    return Data(
                        (0..<(ExternalReference.partSize + 100)).map { _ in UInt8.random(in: 0...255, using: &attaching) })
                default:
                    return Data(
                        (0..<Int.random(in: 0..<3000, using: &attaching)).map { _ in UInt8.random(in: 0...255, using: &attaching)
                        })
                }
            }
            var drafting = SeededRandom(seed: seed ^ 0x1b87_3593)
            var slotting = SeededRandom(seed: seed ^ 0x4c95_7f2d)
            var slotCounter = 0
            let zone = "zone-\(UUID())"
            let draftsZone = "zone-\(UUID())"
            var devices: [(container: ModelContainer, sync: SyncEngine, context: ModelContext)] = []
            var drafts: [SyncEngine] = []
            for name in ["a", "b", "c"] {
                if twoStores {
                    let container = try ModelContainer(
                        for: Schema([Folder.self, Memo.self, Label.self, Slot.self, Draft.self]),
                        configurations: [
                            ModelConfiguration(
                                "memos", schema: Schema([Folder.self, Memo.self, Label.self, Slot.self]),
                                url: URL(fileURLWithPath: directory.file(prefix + name + ".store"))),
                            ModelConfiguration(
                                "drafts", schema: Schema([Draft.self]),
                                url: URL(fileURLWithPath: directory.file(prefix + name + "-drafts.store"))),
                        ])
                    var memos = try configuration(zone: zone)
                    memos.store = "memos"
                    var draftsConfiguration = try configuration(zone: draftsZone)
                    draftsConfiguration.store = "drafts"
                    let sync = try SyncEngine(container: container, configuration: memos)
                    let draftSync = try SyncEngine(container: container, configuration: draftsConfiguration)
                    engines += [sync, draftSync]
                    drafts.append(draftSync)
                    devices.append((track(container), sync, ModelContext(container)))
                } else {
                    let (container, sync) = try device(prefix + name, zone: zone)
                    devices.append((container, sync, ModelContext(container)))
                }
            }
            var draftCounter = 0
            var counter = 0
            func fresh(_ prefix: String) -> String {
                counter += 1
                return "\(prefix)\(counter)"
            }
            var counts = [String: Int]()
            for _ in 0..<operations {
                let index = Int.random(in: 0..<3, using: &random)
                let context = devices[index].context
                let folders = try context.fetch(FetchDescriptor<Folder>(sortBy: [SortDescriptor(\.name)]))
                let memos = try context.fetch(FetchDescriptor<Memo>(sortBy: [SortDescriptor(\.text)]))
                let labels = try context.fetch(FetchDescriptor<Label>(sortBy: [SortDescriptor(\.name)]))
                let roll = Int.random(in: 0..<100, using: &random)
                var operation: String
                switch roll {
                case 0..<8:
                    operation = "insert folder"
                    context.insert(Folder(name: fresh("f")))
                case 8..<24:
                    operation = "insert memo"
                    let memo = Memo(text: fresh("m"), folder: folders.randomElement(using: &random))
                    context.insert(memo)
                    if !labels.isEmpty, Bool.random(using: &random) {
                        memo.labels = [labels.randomElement(using: &random)!]
                    }
                case 24..<27:
                    operation = "insert label"
                    context.insert(Label(name: fresh("l")))
                case 27..<30:
                    // Names from a small pool: devices make the same label,
                    // which merges into one (a unique constraint).
                    operation = "insert pooled label"
                    let label = Label(name: "p\(Int.random(in: 0..<6, using: &random))", color: fresh("c"))
                    context.insert(label)
                    if let memo = memos.randomElement(using: &random) { memo.labels.append(label) }
                case 30..<42:
                    operation = "rename memo"
                    let memo = memos.randomElement(using: &random)
                    memo?.text = fresh("m")
                    if attachments, let memo, Int.random(in: 0..<3, using: &attaching) == 0 {
                        operation = "rename memo and attach"
                        memo.attachment = attachment()
                    }
                case 42..<48:
                    operation = "rename folder"
                    folders.randomElement(using: &random)?.name = fresh("f")
                case 48..<51:
                    operation = "rename label"
                    let label = labels.randomElement(using: &random)
                    let free = (0..<6).map { "p\($0)" }.filter { name in !labels.contains { $0.name == name } }
                    if collisions, Bool.random(using: &colliding), let name = free.randomElement(using: &colliding) {
                        operation = "rename label into the pool"
                        label?.name = name
                    } else {
                        label?.name = fresh("l")
                    }
                case 51..<60:
                    operation = "move memo"
                    memos.randomElement(using: &random)?.folder =
                        Bool.random(using: &random) ? folders.randomElement(using: &random) : nil
                case 60..<68:
                    operation = "label memo"
                    if let memo = memos.randomElement(using: &random), let label = labels.randomElement(using: &random) {
                        if let at = memo.labels.firstIndex(where: { $0 === label }) {
                            memo.labels.remove(at: at)
                        } else {
                            memo.labels.append(label)
                        }
                    }
                case 68..<72:
                    operation = "delete folder"
                    if let folder = folders.randomElement(using: &random) { context.delete(folder) }
                case 72..<78:
                    operation = "delete memo"
                    if let memo = memos.randomElement(using: &random) { context.delete(memo) }
                case 78..<80:
                    operation = "delete label"
                    if let label = labels.randomElement(using: &random) { context.delete(label) }
                default:
                    if trims && Int.random(in: 0..<10, using: &trimming) == 0 {
                        operation = "trim"
                        try await devices[index].sync.trimServerHistory()
                    } else {
                        operation = "sync"
                        try await devices[index].sync.syncNow()
                    }
                }
                if collisions, environment["STRATA_SYNC_SLOTS"] != "0", Int.random(in: 0..<5, using: &slotting) == 0 {
                    let slots = try context.fetch(
                        FetchDescriptor<Slot>(sortBy: [SortDescriptor(\.day), SortDescriptor(\.hour)]))
                    let roll = Int.random(in: 0..<100, using: &slotting)
                    slotCounter += 1
                    switch roll {
                    case 0..<35:
                        counts["insert slot", default: 0] += 1
                        context.insert(
                            Slot(
                                day: Int.random(in: 0..<3, using: &slotting), hour: Int.random(in: 0..<3, using: &slotting),
                                note: "s\(slotCounter)"))
                    case 35..<75:
                        let free = (0..<9).map { ($0 / 3, $0 % 3) }.filter { cell in
                            !slots.contains { $0.day == cell.0 && $0.hour == cell.1 }
                        }
                        if let slot = slots.randomElement(using: &slotting), let cell = free.randomElement(using: &slotting) {
                            counts["move slot", default: 0] += 1
                            (slot.day, slot.hour) = cell
                        }
                    case 75..<90:
                        counts["edit slot", default: 0] += 1
                        slots.randomElement(using: &slotting)?.note = "s\(slotCounter)"
                    default:
                        counts["delete slot", default: 0] += 1
                        if let slot = slots.randomElement(using: &slotting) { context.delete(slot) }
                    }
                    if operation == "sync" || operation == "trim" { try context.save() }
                }
                if twoStores, Int.random(in: 0..<4, using: &drafting) == 0 {
                    let existing = try context.fetch(FetchDescriptor<Draft>(sortBy: [SortDescriptor(\.text)]))
                    let roll = Int.random(in: 0..<100, using: &drafting)
                    draftCounter += 1
                    switch roll {
                    case 0..<40:
                        counts["insert draft", default: 0] += 1
                        context.insert(Draft(text: "d\(draftCounter)"))
                    case 40..<70:
                        counts["edit draft", default: 0] += 1
                        existing.randomElement(using: &drafting)?.text = "d\(draftCounter)"
                    case 70..<85:
                        counts["delete draft", default: 0] += 1
                        if let draft = existing.randomElement(using: &drafting) { context.delete(draft) }
                    default:
                        counts["sync drafts", default: 0] += 1
                        try await drafts[index].syncNow()
                    }
                    // Saved with the operation's save, or now when it
                    // saves nothing: a change left unsaved across a sync
                    // that deletes its model makes the next save throw
                    // (`modelDeleted`), as for any two contexts.
                    if operation == "sync" || operation == "trim" { try context.save() }
                }
                counts[operation, default: 0] += 1
                if environment["STRATA_SYNC_TRACE"] != nil {
                    let changed = (context.insertedModelsArray + context.changedModelsArray + context.deletedModelsArray).map {
                        model -> String in
                        if let memo = model as? Memo { return "memo \(memo.text) in \(memo.folder?.name ?? "-")" }
                        if let folder = model as? Folder { return "folder \(folder.name)" }
                        if let label = model as? Label { return "label \(label.name) (\(label.color))" }
                        if let slot = model as? Slot { return "slot \(slot.day)/\(slot.hour) \(slot.note)" }
                        return "?"
                    }
                    print("trace \(["a", "b", "c"][index]) \(operation) \(changed)")
                }
                if operation != "sync" && operation != "trim" { try context.save() }
            }
            print("SyncConvergenceTests operations: \(counts.sorted { $0.key < $1.key })")
            // Everyone syncs: a, b, c, then a and b again for what c pushed.
            for index in [0, 1, 2, 0, 1] {
                // What the last operation left unsaved goes too.
                try devices[index].context.save()
                try await devices[index].sync.syncNow()
                if twoStores { try await drafts[index].syncNow() }
            }
            if twoStores {
                let texts = try devices.map {
                    try ModelContext($0.container).fetch(FetchDescriptor<Draft>()).map(\.text).sorted()
                }
                XCTAssertEqual(texts[1], texts[0], "b's drafts (seed \(seed))")
                XCTAssertEqual(texts[2], texts[0], "c's drafts (seed \(seed))")
                XCTAssertGreaterThan(texts[0].count, 0, "the run ends with drafts (seed \(seed))")
                for sync in drafts { XCTAssertEqual(sync.status.pendingChanges, 0) }
            }
            let dumps = try devices.map { device in
                try graphDump(device.container)
                    + ModelContext(device.container).fetch(FetchDescriptor<Slot>()).map {
                        "slot \($0.day)/\($0.hour): \($0.note)"
                    }.sorted()
            }
            for (index, name) in [(1, "b"), (2, "c")] where dumps[index] != dumps[0] {
                let onlyA = dumps[0].filter { !dumps[index].contains($0) }
                let onlyOther = dumps[index].filter { !dumps[0].contains($0) }
                XCTFail("a and \(name) differ (seed \(seed)): only on a \(onlyA), only on \(name) \(onlyOther)")
            }
            XCTAssertGreaterThan(dumps[0].count, operations / 100, "the run ends with models (seed \(seed))")
            for (index, device) in devices.enumerated() {
                XCTAssertEqual(try device.container.checkIntegrity(), [], "device \(index) (seed \(seed))")
                XCTAssertEqual(device.sync.status.pendingChanges, 0)
            }
        }
    }
#endif
