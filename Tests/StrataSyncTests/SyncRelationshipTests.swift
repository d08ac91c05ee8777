#if Sync
    import Foundation
    import Strata
    @testable import StrataSync
    import StrataTesting
    import XCTest

    @Model
    final class Folder {
        var name: String
        @Relationship(deleteRule: .cascade, inverse: \Memo.folder) var memos: [Memo] = []

        init(name: String) { self.name = name }
    }

    @Model
    final class Memo {
        var text: String
        var folder: Folder?
        var labels: [Label] = []
        @Attribute(.externalStorage) var attachment: Data?

        init(text: String, folder: Folder? = nil) {
            self.text = text
            self.folder = folder
        }
    }

    @Model
    final class Label {
        @Attribute(.unique) var name: String
        var color = ""
        @Relationship(inverse: \Memo.labels) var memos: [Memo] = []

        init(name: String, color: String = "") {
            self.name = name
            self.color = color
        }
    }

    @Model
    final class Slot {
        #Unique<Slot>([\.day, \.hour])
        var day: Int
        var hour: Int
        var note: String

        init(day: Int, hour: Int, note: String) {
            self.day = day
            self.hour = hour
            self.note = note
        }
    }

    /// What ``SyncEngine/didApplyRemoteChanges`` told for one container
    /// under one `userInfo` key, while this lives.
    final class Told<Element>: @unchecked Sendable {
        // Guarded by `lock`.
        private var elements: [Element] = []
        private let lock = NSLock()
        private var observer: (any NSObjectProtocol)?

        init(_ key: String, by container: ModelContainer) {
            observer = NotificationCenter.default.addObserver(
                forName: SyncEngine.didApplyRemoteChanges, object: container, queue: nil
            ) { [weak self] note in
                guard let self, let told = note.userInfo?[key] as? [Element] else { return }
                lock.withLock { elements += told }
            }
        }

        deinit { if let observer { NotificationCenter.default.removeObserver(observer) } }

        var all: [Element] { lock.withLock { elements } }
    }

    /// Saves a change of the app's once, on the first notification `name`
    /// of a save authored as sync's own (that updates `model`, when given),
    /// as another context of the app would, at that moment.
    final class CutIn: @unchecked Sendable {
        // Guarded by `lock`.
        private var saved = false
        private var failure: (any Error)?
        private let lock = NSLock()
        private var observer: (any NSObjectProtocol)?

        init(
            _ container: ModelContainer, on name: Notification.Name, updating model: PersistentIdentifier? = nil,
            _ body: @escaping @Sendable (ModelContext) throws -> Void
        ) {
            observer = NotificationCenter.default.addObserver(forName: name, object: nil, queue: nil) {
                [weak self] note in
                let updated = note.userInfo?[ModelContext.NotificationKey.updatedIdentifiers.rawValue]
                guard let self, let context = note.object as? ModelContext, context.container === container,
                    context.author == SyncReplica.author,
                    model.map({ (updated as? [PersistentIdentifier])?.contains($0) == true }) ?? true,
                    lock.withLock({ !saved })
                else { return }
                let local = ModelContext(container)
                do {
                    try body(local)
                    try local.save()
                    lock.withLock { saved = true }
                } catch {
                    lock.withLock {
                        saved = true
                        failure = error
                    }
                }
            }
        }

        deinit { if let observer { NotificationCenter.default.removeObserver(observer) } }

        /// Whether the change was saved; throws what saving it threw.
        func wasSaved() throws -> Bool {
            try lock.withLock {
                if let failure { throw failure }
                return saved
            }
        }
    }

    extension SyncTestCase {
        /// Every folder, memo and label with its relationships, by names:
        /// the same on two devices when they hold the same graph.
        func graphDump(_ container: ModelContainer) throws -> [String] {
            let context = ModelContext(container)
            var lines: [String] = []
            for folder in try context.fetch(FetchDescriptor<Folder>()) {
                lines.append("folder \(folder.name): " + folder.memos.map(\.text).sorted().joined(separator: ","))
            }
            for memo in try context.fetch(FetchDescriptor<Memo>()) {
                let labels = memo.labels.map(\.name).sorted().joined(separator: ",")
                // The attachment's length and FNV-1a digest.
                let attachment = memo.attachment.map { data in
                    "\(data.count):\(data.reduce(UInt64(0xcbf2_9ce4_8422_2325)) { ($0 ^ UInt64($1)) &* 0x100_0000_01b3 })"
                }
                lines.append(
                    "memo \(memo.text) in \(memo.folder?.name ?? "-") labels \(labels)"
                        + (attachment.map { " attachment \($0)" } ?? ""))
            }
            for label in try context.fetch(FetchDescriptor<Label>()) {
                let color = label.color.isEmpty ? "" : " (\(label.color))"
                lines.append("label \(label.name)\(color): " + label.memos.map(\.text).sorted().joined(separator: ","))
            }
            return lines.sorted()
        }
    }

    final class SyncRelationshipTests: SyncTestCase {
        override class var models: [any PersistentModel.Type] { [Folder.self, Memo.self, Label.self] }

        func dump(_ container: ModelContainer) throws -> [String] { try graphDump(container) }

        func testInsertsThatCollideOnAUniqueValueBecomeOneModel() async throws {
            let zone = "zone-\(UUID())"
            let (a, syncA) = try device("a", zone: zone)
            let (b, syncB) = try device("b", zone: zone)
            let (c, syncC) = try device("c", zone: zone)
            // Three devices make the same label, each with a memo on it.
            for (container, color, text) in [(a, "red", "from a"), (b, "blue", "from b"), (c, "green", "from c")] {
                let context = ModelContext(container)
                let label = Label(name: "urgent", color: color)
                let memo = Memo(text: text)
                context.insert(memo)
                memo.labels = [label]
                try context.save()
            }
            // b pushes first; a pushes after pulling b's; c pushed nothing
            // before it pulls both.
            try await syncB.syncNow()
            try await syncA.syncNow()
            try await syncC.syncNow()
            try await syncB.syncNow()
            try await syncA.syncNow()
            // One label, holding every memo, with the color of the last
            // save in the zone's order (c's).
            let expected = [
                "label urgent (green): from a,from b,from c", "memo from a in - labels urgent",
                "memo from b in - labels urgent", "memo from c in - labels urgent",
            ]
            XCTAssertEqual(try dump(a), expected)
            XCTAssertEqual(try dump(b), expected)
            XCTAssertEqual(try dump(c), expected)
            for container in [a, b, c] { XCTAssertEqual(try container.checkIntegrity(), []) }
        }

        /// Two labels, each with a memo, made on A and pulled by B.
        func twoLabels(_ a: ModelContainer, _ syncA: SyncEngine, _ syncB: SyncEngine) async throws {
            let context = ModelContext(a)
            for (name, color, text) in [("crimson", "dark", "m1"), ("scarlet", "bright", "m2")] {
                let memo = Memo(text: text)
                context.insert(memo)
                memo.labels = [Label(name: name, color: color)]
            }
            try context.save()
            try await syncA.syncNow()
            try await syncB.syncNow()
        }

        /// Three devices of one zone (their stores named with `suffix`),
        /// all holding crimson (m1) and scarlet (m2).
        func threeDevicesWithTwoLabels(_ suffix: String = "") async throws -> (
            ModelContainer, SyncEngine, ModelContainer, SyncEngine, ModelContainer, SyncEngine
        ) {
            let zone = "zone-\(UUID())"
            let (a, syncA) = try device("a" + suffix, zone: zone)
            let (b, syncB) = try device("b" + suffix, zone: zone)
            let (c, syncC) = try device("c" + suffix, zone: zone)
            try await twoLabels(a, syncA, syncB)
            try await syncC.syncNow()
            return (a, syncA, b, syncB, c, syncC)
        }

        /// Three devices of one zone holding crimson (m1) and scarlet
        /// (m2); C then makes red (c's) on m3 and pushes it.
        func threeDevicesAndRedOnC(_ suffix: String = "") async throws -> (
            ModelContainer, SyncEngine, ModelContainer, SyncEngine, ModelContainer, SyncEngine
        ) {
            let (a, syncA, b, syncB, c, syncC) = try await threeDevicesWithTwoLabels(suffix)
            let onC = ModelContext(c)
            let m3 = Memo(text: "m3")
            onC.insert(m3)
            m3.labels = [Label(name: "red", color: "c's")]
            try onC.save()
            try await syncC.syncNow()
            return (a, syncA, b, syncB, c, syncC)
        }

        /// An engine for `container` whose server runs `hook` once, before
        /// the first push it passes on (or each of `hooks` before the push
        /// of its number, and each of `pullHooks` before the pull of its
        /// number).
        func hookedEngine(
            _ container: ModelContainer, zone: String, hooks: [Int: @Sendable () async -> Void] = [:],
            pullHooks: [Int: @Sendable () async -> Void] = [:], hook: (@Sendable () async -> Void)? = nil
        ) throws -> SyncEngine {
            var hooks = hooks
            if let hook { hooks[0] = hook }
            let hooked = PushHook(
                PullHook(PostgresZoneServer(configuration: try configuration(zone: zone)), before: pullHooks), before: hooks)
            let engine = try SyncEngine(container: container, configuration: try configuration(zone: zone), server: hooked)
            engines.append(engine)
            return engine
        }

        /// On each container, a new memo `text` labeled with a new red label
        /// of `color`, saved.
        func redOnNewMemos(_ memos: [(ModelContainer, color: String, text: String)]) throws {
            for (container, color, text) in memos {
                let context = ModelContext(container)
                let memo = Memo(text: text)
                context.insert(memo)
                memo.labels = [Label(name: "red", color: color)]
                try context.save()
            }
        }

        /// Two devices of `zone` that each make red at once: A pushes
        /// between B's prepare and B's push, so the two reds merge with
        /// both identifiers (B's first on B).
        func redMadeAtOnceOnTwo(zone: String) async throws -> (ModelContainer, SyncEngine, ModelContainer, SyncEngine) {
            let (a, syncA) = try device("a", zone: zone)
            let (b, _) = try device("b", zone: zone)
            let syncB = try hookedEngine(b, zone: zone) { try? await syncA.syncNow() }
            try redOnNewMemos([(a, "a's", "m1"), (b, "b's", "m2")])
            for sync in [syncB, syncA] { try await sync.syncNow() }
            return (a, syncA, b, syncB)
        }

        /// Asserts that `containers` hold one graph, whose labels are
        /// `labels`, and pass their integrity checks; returns the graph.
        @discardableResult
        func assertOneGraph(_ containers: [ModelContainer], labels: [String], file: StaticString = #filePath, line: UInt = #line)
            throws -> [String]
        {
            let dumps = try containers.map { try dump($0) }
            for (index, other) in dumps.enumerated().dropFirst() {
                XCTAssertEqual(other, dumps[0], "device \(index)", file: file, line: line)
            }
            XCTAssertEqual(dumps[0].filter { $0.hasPrefix("label") }, labels, file: file, line: line)
            for container in containers { XCTAssertEqual(try container.checkIntegrity(), [], file: file, line: line) }
            return dumps[0]
        }

        /// Adds the memo `text` to the memos of the label `name` on
        /// `container`, saved.
        func label(_ text: String, with name: String, on container: ModelContainer) throws {
            let context = ModelContext(container)
            let label = try XCTUnwrap(context.fetch(FetchDescriptor<Label>(predicate: #Predicate { $0.name == name })).first)
            let memo = try XCTUnwrap(context.fetch(FetchDescriptor<Memo>(predicate: #Predicate { $0.text == text })).first)
            label.memos.append(memo)
            try context.save()
        }

        /// Renames the label named `from` to `to` on `container`.
        func rename(_ from: String, to: String, color: String? = nil, on container: ModelContainer) throws {
            let context = ModelContext(container)
            let label = try XCTUnwrap(context.fetch(FetchDescriptor<Label>(predicate: #Predicate { $0.name == from })).first)
            label.name = to
            if let color { label.color = color }
            try context.save()
        }

        /// Two devices rename two labels to one name, neither knowing of
        /// the other's: no device stops. Both become one label on every
        /// device, whatever the order: the one that took the name first in
        /// the zone's order keeps its values, the later rename's changed
        /// attributes go on top, and it holds both labels' memos.
        func testUpdatesThatCollideOnAUniqueValueMergeOnEveryDevice() async throws {
            for aFirst in [true, false] {
                let (a, syncA, b, syncB, c, syncC) = try await threeDevicesWithTwoLabels("\(aFirst)")
                try rename("crimson", to: "red", color: "a's", on: a)
                try rename("scarlet", to: "red", color: "b's", on: b)
                // The device that renames second in the zone's order is
                // told that its renamed label merged into the other.
                let second = aFirst ? b : a
                let lost = Told<SyncEngine.LostChange>(SyncEngine.lostChangesKey, by: second)
                let renamedSecond = try XCTUnwrap(
                    ModelContext(second).fetch(FetchDescriptor<Label>(predicate: #Predicate { $0.name == "red" })).first)
                for sync in aFirst ? [syncA, syncB] : [syncB, syncA] { try await sync.syncNow() }
                // C, which pulls both renames, is told of the merge.
                let merges = Told<SyncEngine.Merge>(SyncEngine.mergedModelsKey, by: c)
                for sync in [syncA, syncB, syncC] { try await sync.syncNow() }
                let survivor = try XCTUnwrap(
                    ModelContext(second).fetch(FetchDescriptor<Label>(predicate: #Predicate { $0.name == "red" })).first)
                XCTAssertEqual(
                    lost.all,
                    [
                        SyncEngine.LostChange(
                            model: renamedSecond.persistentModelID, reason: .merged(into: survivor.persistentModelID))
                    ], "a first: \(aFirst)")
                XCTAssertNotEqual(renamedSecond.persistentModelID, survivor.persistentModelID)
                let told = merges.all
                XCTAssertEqual(told.count, 1, "a first: \(aFirst)")
                if let merge = told.first {
                    let context = ModelContext(c)
                    XCTAssertEqual((context.model(for: merge.into) as? Label)?.name, "red")
                    let labels = try context.fetch(FetchDescriptor<Label>())
                    XCTAssertFalse(labels.contains { $0.persistentModelID == merge.merged })
                }
                // The later rename in the zone's order merges into the
                // earlier one, its changed attributes (name and color) on
                // top: the color of the later rename.
                let color = aFirst ? "b's" : "a's"
                let expected = ["label red (\(color)): m1,m2", "memo m1 in - labels red", "memo m2 in - labels red"]
                for (name, container) in [("a", a), ("b", b), ("c", c)] {
                    XCTAssertEqual(try dump(container), expected, "\(name), a first: \(aFirst)")
                    XCTAssertEqual(try container.checkIntegrity(), [])
                }
                for sync in [syncA, syncB, syncC] { XCTAssertNil(sync.status.lastError) }
            }
        }

        /// A rename to the name a model another device inserted holds
        /// merges the two as well, in either order, with both memos.
        func testARenameCollidingWithAnotherDevicesInsertMerges() async throws {
            for aFirst in [true, false] {
                let zone = "zone-\(UUID())"
                let (a, syncA) = try device("a\(aFirst)", zone: zone)
                let (b, syncB) = try device("b\(aFirst)", zone: zone)
                try await twoLabels(a, syncA, syncB)
                let context = ModelContext(a)
                let memo = Memo(text: "m3")
                context.insert(memo)
                memo.labels = [Label(name: "red", color: "new on a")]
                try context.save()
                try rename("scarlet", to: "red", on: b)
                for sync in aFirst ? [syncA, syncB] : [syncB, syncA] { try await sync.syncNow() }
                for sync in [syncA, syncB] { try await sync.syncNow() }
                XCTAssertEqual(try dump(a), try dump(b), "a first: \(aFirst)")
                let labels = try dump(a).filter { $0.hasPrefix("label red") }
                XCTAssertEqual(labels, ["label red (new on a): m2,m3"], "a first: \(aFirst)")
                for container in [a, b] { XCTAssertEqual(try container.checkIntegrity(), []) }
            }
        }

        /// B renames scarlet to red in a save it has not pushed, then pulls
        /// C's new red label and C's later change of red's memos (sent in
        /// full): B merged the two at once, the others merge them when B's
        /// rename arrives; every device ends with red holding all three
        /// memos, scarlet's among them.
        func testAMergeAheadOfTheZoneKeepsItsOwnMembers() async throws {
            let (a, syncA, b, syncB, c, syncC) = try await threeDevicesWithTwoLabels()
            try rename("scarlet", to: "red", on: b)
            let onC = ModelContext(c)
            let red = Label(name: "red", color: "c's")
            let m3 = Memo(text: "m3")
            onC.insert(m3)
            m3.labels = [red]
            try onC.save()
            try await syncC.syncNow()
            let m4 = Memo(text: "m4")
            onC.insert(m4)
            red.memos.append(m4)
            try onC.save()
            try await syncC.syncNow()
            for sync in [syncB, syncA, syncC, syncA, syncB] { try await sync.syncNow() }
            let expected = [
                "label crimson (dark): m1", "label red (c's): m2,m3,m4", "memo m1 in - labels crimson",
                "memo m2 in - labels red", "memo m3 in - labels red", "memo m4 in - labels red",
            ]
            for (name, container) in [("a", a), ("b", b), ("c", c)] {
                XCTAssertEqual(try dump(container), expected, name)
                XCTAssertEqual(try container.checkIntegrity(), [])
            }
        }

        /// C renames crimson to ruby in a save it has not pushed, then
        /// pulls B's rename of crimson to red, the name C's own label holds:
        /// C merges the two as every other device does, and C's rename
        /// then names the merged label everywhere.
        func testARenameIntoAValueHeldHereMergesThoughRenamedAwayLocally() async throws {
            let (a, syncA, b, syncB, c, syncC) = try await threeDevicesAndRedOnC()
            try rename("crimson", to: "red", on: b)
            try await syncB.syncNow()
            try rename("crimson", to: "ruby", on: c)
            for sync in [syncC, syncA, syncB, syncC] { try await sync.syncNow() }
            try assertOneGraph([a, b, c], labels: ["label ruby (c's): m1,m3", "label scarlet (bright): m2"])
        }

        /// C makes red on m3 and pushes it. B renames scarlet to red (B pulls
        /// C's red first, so B merges the two at once; the others merge them
        /// when B's rename arrives). C, before it pulls that, renames
        /// scarlet to ruby and adds m4 to it: its list of scarlet's memos
        /// is of the scarlet it knew. Every device takes that list as
        /// changes to scarlet's members, so the merged label keeps m3.
        func testAListSentForAModelMergedMeanwhileKeepsTheSurvivorsMembers() async throws {
            let (a, syncA, b, syncB, c, syncC) = try await threeDevicesAndRedOnC()
            let onC = ModelContext(c)
            try rename("scarlet", to: "red", on: b)
            try await syncB.syncNow()
            let scarlet = try XCTUnwrap(
                onC.fetch(FetchDescriptor<Label>(predicate: #Predicate { $0.name == "scarlet" })).first)
            scarlet.name = "ruby"
            let m4 = Memo(text: "m4")
            onC.insert(m4)
            scarlet.memos.append(m4)
            try onC.save()
            for sync in [syncA, syncC, syncA, syncB] { try await sync.syncNow() }
            try assertOneGraph([a, b, c], labels: ["label crimson (dark): m1", "label ruby (c's): m2,m3,m4"])
        }

        /// B puts m1 on scarlet and has not pushed it when it pulls A's
        /// rename of scarlet to red (scarlet merges into C's red) and then
        /// A's new list of red's memos, which drops m3. B's save comes last
        /// in the zone's order and names scarlet: every device ends with the
        /// list B holds. Before, B kept red's members as they were here (its
        /// save masked them), while the others took A's list and added only
        /// what B's save changed of scarlet's; m3 stayed on B alone. Seed
        /// 69 of the convergence test met this.
        func testAListSavedForAModelBeforeItMergedIsTheSurvivorsListEverywhere() async throws {
            let (a, syncA, b, syncB, c, syncC) = try await threeDevicesAndRedOnC()
            try label("m1", with: "scarlet", on: b)
            try rename("scarlet", to: "red", on: a)
            try await syncA.syncNow()
            try await syncA.syncNow()
            let onA = ModelContext(a)
            let red = try XCTUnwrap(onA.fetch(FetchDescriptor<Label>(predicate: #Predicate { $0.name == "red" })).first)
            red.memos.removeAll { $0.text == "m3" }
            try onA.save()
            for sync in [syncA, syncB, syncC, syncA] { try await sync.syncNow() }
            try assertOneGraph([a, b, c], labels: ["label crimson (dark): m1", "label red (c's): m1,m2,m3"])
        }

        /// A and B each make red, which merge: red has A's identifier and
        /// B's. A makes ruby; C, before it pulls ruby, renames red to ruby,
        /// so red merges into ruby on A and B. A merge points only the
        /// row's first identifier at the survivor; the other still names
        /// red's row, gone. A trims, and B, behind the trim, restores the
        /// snapshot. Before, B took that identifier's row for a model
        /// deleted here: it sent a delete of it, and the snapshot's ruby,
        /// meeting it, was deleted too. A row merged away here is no
        /// delete. Seed 50 of the convergence test met this.
        func testARestoreKeepsAModelThatARowMergedAwayHereNamed() async throws {
            let zone = "zone-\(UUID())"
            let (a, syncA, b, syncB) = try await redMadeAtOnceOnTwo(zone: zone)
            let (c, syncC) = try device("c", zone: zone)
            try await syncC.syncNow()
            let onA = ModelContext(a)
            let m3 = Memo(text: "m3")
            onA.insert(m3)
            m3.labels = [Label(name: "ruby", color: "a's ruby")]
            try onA.save()
            try await syncA.syncNow()
            try rename("red", to: "ruby", on: c)
            for sync in [syncC, syncA, syncB] { try await sync.syncNow() }
            onA.insert(Memo(text: "m4"))
            try onA.save()
            try await syncA.syncNow()
            _ = try await syncA.trimServerHistory()
            for sync in [syncB, syncC, syncA, syncB] { try await sync.syncNow() }
            try assertOneGraph([a, b, c], labels: ["label ruby (a's ruby): m1,m2,m3"])
        }

        /// A renames scarlet to red and has not pushed it when it pulls B's
        /// new red (which merges into scarlet here, ahead of the zone) and
        /// then B's delete of scarlet. In the zone's order red never merged
        /// and stays, and A's rename of a deleted model counts for nothing:
        /// A keeps red as B's. Before, the delete took the merged model
        /// with it, and red was gone on A alone. Seed 7 of the convergence
        /// test (slots) met this.
        func testADeleteOfAModelMergedIntoAheadOfTheZoneKeepsThePulledOne() async throws {
            let zone = "zone-\(UUID())"
            let (a, syncA) = try device("a", zone: zone)
            let (b, syncB) = try device("b", zone: zone)
            try await twoLabels(a, syncA, syncB)
            try redOnNewMemos([(b, "b's", "m3")])
            let onB = ModelContext(b)
            try onB.delete(model: Label.self, where: #Predicate { $0.name == "scarlet" })
            try onB.save()
            try await syncB.syncNow()
            try rename("scarlet", to: "red", on: a)
            for sync in [syncA, syncB, syncA] { try await sync.syncNow() }
            try assertOneGraph([a, b], labels: ["label crimson (dark): m1", "label red (b's): m3"])
        }

        /// B makes red on m3; C, not knowing it, makes red on m4. B pushes
        /// between C's prepare and C's push, so C's red reaches the zone
        /// as an insert after B's. Meanwhile A pulls B's red, renames it to
        /// ruby and crimson to red, and then pulls C's red before it pushes:
        /// in the zone's order C's red meets B's (ruby here), not crimson,
        /// and merges into it on every device.
        func testAnInsertMergesIntoTheZonesHolderThoughRenamedAwayLocally() async throws {
            let zone = "zone-\(UUID())"
            let (a, syncA) = try device("a", zone: zone)
            let (b, syncB) = try device("b", zone: zone)
            let (c, _) = try device("c", zone: zone)
            try await twoLabels(a, syncA, syncB)
            let syncC = try hookedEngine(c, zone: zone) {
                try? await syncB.syncNow()
                try? await syncA.syncNow()
                let onA = ModelContext(a)
                for (from, to) in [("red", "ruby"), ("crimson", "red")] {
                    let label = try? onA.fetch(FetchDescriptor<Label>(predicate: #Predicate { $0.name == from })).first
                    label?.name = to
                    try? onA.save()
                }
            }
            try redOnNewMemos([(b, "b's", "m3"), (c, "c's", "m4")])
            try await syncC.syncNow()
            XCTAssertEqual(
                try dump(a).filter { $0.hasPrefix("label") },
                ["label red (dark): m1", "label ruby (b's): m3", "label scarlet (bright): m2"])
            for sync in [syncA, syncB, syncC, syncA, syncB] { try await sync.syncNow() }
            try assertOneGraph(
                [a, b, c], labels: ["label red (dark): m1", "label ruby (c's): m3,m4", "label scarlet (bright): m2"])
        }

        /// C makes red and pushes it. A renames crimson to red and pulls
        /// C's red (A merges the two at once); B renames scarlet to red and
        /// pushes first. A then pulls B's rename: its red holds C's, first
        /// in the zone, so scarlet merges into it, as on every device, and
        /// C's later delete of red takes the one merged label everywhere.
        func testARenameMeetsAModelMergedHereAheadOfTheZone() async throws {
            let (a, syncA, b, syncB, c, syncC) = try await threeDevicesAndRedOnC()
            let onC = ModelContext(c)
            try rename("crimson", to: "red", on: a)
            try rename("scarlet", to: "red", on: b)
            try await syncB.syncNow()
            for sync in [syncA, syncC, syncB] { try await sync.syncNow() }
            try assertOneGraph([a, b, c], labels: ["label red (c's): m1,m2,m3"])
            let red = try XCTUnwrap(onC.fetch(FetchDescriptor<Label>()).first)
            onC.delete(red)
            try onC.save()
            for sync in [syncC, syncA, syncB] { try await sync.syncNow() }
            try assertOneGraph([a, b, c], labels: [])
        }

        /// C makes red and pushes it. A deletes scarlet (or red), and B
        /// renames scarlet to red and pushes: in the zone's order scarlet
        /// merges into red, and A's delete then takes the merged label. A,
        /// pulling B's rename, deletes the other one at once.
        func testARenameMergingWithAModelDeletedHereTakesTheMergedOne() async throws {
            for deleted in ["scarlet", "red"] {
                let (a, syncA, b, syncB, c, syncC) = try await threeDevicesAndRedOnC(deleted)
                try await syncA.syncNow()
                let onA = ModelContext(a)
                try onA.delete(
                    XCTUnwrap(onA.fetch(FetchDescriptor<Label>(predicate: #Predicate { $0.name == deleted })).first))
                try onA.save()
                try rename("scarlet", to: "red", on: b)
                for sync in [syncB, syncA, syncC, syncB] { try await sync.syncNow() }
                try assertOneGraph([a, b, c], labels: ["label crimson (dark): m1"])
            }
        }

        /// A colors scarlet pink, then renames it to red, which C's label
        /// holds in the zone, and pulls C's red before pushing (A merges
        /// the two at once). In the zone's order the pink color changes
        /// scarlet while it is still apart, and the merge keeps red's own
        /// color, as A's rename brings only the name: A keeps red's too.
        func testAMergeAheadOfTheZoneDropsWhatEarlierSavesChanged() async throws {
            let (a, syncA, b, syncB, c, syncC) = try await threeDevicesAndRedOnC()
            let onA = ModelContext(a)
            let scarlet = try XCTUnwrap(
                onA.fetch(FetchDescriptor<Label>(predicate: #Predicate { $0.name == "scarlet" })).first)
            scarlet.color = "pink"
            try onA.save()
            scarlet.name = "red"
            try onA.save()
            for sync in [syncA, syncB, syncC, syncA] { try await sync.syncNow() }
            try assertOneGraph([a, b, c], labels: ["label crimson (dark): m1", "label red (c's): m2,m3"])
        }

        /// A and B make red at once; A pushes between B's prepare and B's
        /// push, so the two merge with both identifiers (B's first on B).
        /// A trims the zone's history; D, new, restores the snapshot, and B
        /// then adds m3 to red under its own identifier: D finds the label.
        func testASnapshotCarriesTheIdentifiersMergedIntoAModel() async throws {
            let zone = "zone-\(UUID())"
            let (a, syncA, b, syncB) = try await redMadeAtOnceOnTwo(zone: zone)
            _ = try await syncA.trimServerHistory()
            let (d, syncD) = try device("d", zone: zone)
            try await syncD.syncNow()
            let onB = ModelContext(b)
            let red = try XCTUnwrap(onB.fetch(FetchDescriptor<Label>()).first)
            let m3 = Memo(text: "m3")
            onB.insert(m3)
            red.memos.append(m3)
            try onB.save()
            for sync in [syncB, syncA, syncD] { try await sync.syncNow() }
            try assertOneGraph([a, b, d], labels: ["label red (b's): m1,m2,m3"])
        }

        /// C makes red. B renames scarlet to red (the two merge) and A then
        /// renames red to ruby; A trims. C, behind both renames, restores
        /// the snapshot: its red becomes ruby and scarlet's identifier names
        /// ruby too, so C's scarlet merges into it there instead of taking
        /// the same name (which stopped C's sync).
        func testARestoreMergesAModelBehindIntoTheOneItMergedInto() async throws {
            let (a, syncA, b, syncB, c, syncC) = try await threeDevicesAndRedOnC()
            try rename("scarlet", to: "red", on: b)
            try await syncB.syncNow()
            try await syncA.syncNow()
            try rename("red", to: "ruby", on: a)
            try await syncA.syncNow()
            _ = try await syncA.trimServerHistory()
            for sync in [syncC, syncB] { try await sync.syncNow() }
            try assertOneGraph([a, b, c], labels: ["label crimson (dark): m1", "label ruby (c's): m2,m3"])
        }

        /// One save on A renames crimson to azure and makes a new crimson
        /// (before and after the rename, so the change set holds the
        /// insert on either side of the update). The new crimson merges
        /// into nothing on B: the set moves the old one off its name,
        /// though the store's index still holds it there when the insert is
        /// taken. Seed 67 of the convergence test met this in a snapshot.
        func testASetThatRenamesAModelAndInsertsItsOldValueKeepsBoth() async throws {
            for insertFirst in [true, false] {
                let zone = "zone-\(UUID())"
                let (a, syncA) = try device("a\(insertFirst)", zone: zone)
                let (b, syncB) = try device("b\(insertFirst)", zone: zone)
                try await twoLabels(a, syncA, syncB)
                let context = ModelContext(a)
                let crimson = try XCTUnwrap(
                    context.fetch(FetchDescriptor<Label>(predicate: #Predicate { $0.name == "crimson" })).first)
                let m3 = Memo(text: "m3")
                if !insertFirst { crimson.name = "azure" }
                context.insert(m3)
                m3.labels = [Label(name: "crimson", color: "new")]
                if insertFirst { crimson.name = "azure" }
                try context.save()
                for sync in [syncA, syncB] { try await sync.syncNow() }
                try assertOneGraph(
                    [a, b],
                    labels: ["label azure (dark): m1", "label crimson (new): m3", "label scarlet (bright): m2"])
            }
        }

        /// C makes azure and pushes it; B makes red before it pulls azure,
        /// and pushes red. A renames scarlet to red before it pulls B's red:
        /// in the zone scarlet merges into B's red, whose identifier is the
        /// model's own on B, and scarlet's goes with it. B trims. C, behind
        /// since it pushed azure, renames azure to red and, before it
        /// pushes, restores B's snapshot: red (B's identifier, then
        /// scarlet's) and, after it in B's rows, azure. C knows scarlet's
        /// identifier and not red's: the snapshot's red is C's scarlet, and
        /// C's azure, red by C's own save, merges into it. Before, C took
        /// red's identifier first and made a second red (azure, moving off
        /// red in the zone, did not count), and C stopped on the unique
        /// constraint. Seed 48 of the convergence test met this.
        func testARestoreTakesTheIdentifierItKnowsOfAMergedModelFirst() async throws {
            let (a, syncA, b, syncB, c, syncC) = try await threeDevicesWithTwoLabels()
            let onC = ModelContext(c)
            onC.insert(Label(name: "azure", color: "c's"))
            try onC.save()
            try await syncC.syncNow()
            try redOnNewMemos([(b, "b's", "m3")])
            try await syncB.syncNow()
            try rename("scarlet", to: "red", on: a)
            for sync in [syncA, syncA, syncB] { try await sync.syncNow() }
            _ = try await syncB.trimServerHistory()
            try rename("azure", to: "red", on: c)
            for sync in [syncC, syncA, syncB, syncC] { try await sync.syncNow() }
            try assertOneGraph([a, b, c], labels: ["label crimson (dark): m1", "label red (b's): m2,m3"])
        }

        /// Three devices rename three labels to red, each before it pulls
        /// the others' renames: in the zone the three merge into the first.
        /// A trims; C, behind since it pulled the three labels, restores
        /// the snapshot, which names the one red with all three identifiers.
        /// C holds three models for them: the second and the third both
        /// merge into the first. Before, the third merged into the second,
        /// which was merging away, and C stopped on the unique constraint.
        /// Seed 16 of the convergence test met this.
        func testARestoreMergesThreeModelsItHoldsIntoOne() async throws {
            let zone = "zone-\(UUID())"
            let (a, syncA) = try device("a", zone: zone)
            let (b, syncB) = try device("b", zone: zone)
            let (c, syncC) = try device("c", zone: zone)
            let (d, syncD) = try device("d", zone: zone)
            let context = ModelContext(a)
            for (name, text) in [("x", "m1"), ("y", "m2"), ("z", "m3")] {
                let memo = Memo(text: text)
                context.insert(memo)
                memo.labels = [Label(name: name, color: name)]
            }
            try context.save()
            for sync in [syncA, syncB, syncC, syncD] { try await sync.syncNow() }
            for (from, container, sync) in [("x", a, syncA), ("y", b, syncB), ("z", d, syncD)] {
                try rename(from, to: "red", on: container)
                try await sync.syncNow()
            }
            for sync in [syncA, syncB, syncD, syncA] { try await sync.syncNow() }
            _ = try await syncA.trimServerHistory()
            for sync in [syncC, syncB, syncD] { try await sync.syncNow() }
            try assertOneGraph([a, b, c, d], labels: ["label red (x): m1,m2,m3"])
        }

        /// One save on A renames crimson to azure and scarlet to crimson.
        /// On B the update of scarlet meets crimson's old name, held by the
        /// store's index or, when B renamed crimson to maroon and has not
        /// pushed it, by the zone's values; but the set moves crimson off
        /// it: nothing collides, and both labels stay.
        func testASetThatPassesAUniqueValueOnKeepsBoth() async throws {
            for (azureFirst, maroonOnB) in [(true, false), (false, false), (true, true), (false, true)] {
                let zone = "zone-\(UUID())"
                let (a, syncA) = try device("a\(azureFirst)\(maroonOnB)", zone: zone)
                let (b, syncB) = try device("b\(azureFirst)\(maroonOnB)", zone: zone)
                try await twoLabels(a, syncA, syncB)
                if maroonOnB { try rename("crimson", to: "maroon", on: b) }
                let context = ModelContext(a)
                let labels = try context.fetch(FetchDescriptor<Label>(sortBy: [SortDescriptor(\.name)]))
                let (crimson, scarlet) = (labels[0], labels[1])
                if azureFirst {
                    crimson.name = "azure"
                    scarlet.name = "crimson"
                } else {
                    scarlet.name = "crimson"
                    crimson.name = "azure"
                }
                try context.save()
                for sync in [syncA, syncB, syncA] { try await sync.syncNow() }
                let labelsNow = ["label \(maroonOnB ? "maroon" : "azure") (dark): m1", "label crimson (bright): m2"]
                try assertOneGraph([a, b], labels: labelsNow.sorted())
            }
        }

        /// C makes red and pushes it. A adds m1 to scarlet, then makes its
        /// own red on m4, and pushes neither before it pulls C's red (which
        /// merges into A's red here, ahead of the zone) and B's rename of
        /// scarlet to red (which merges scarlet into A's red, the holder).
        /// A's saves send red's list as A holds it, with the members both
        /// merges brought: every device ends with it. Before, A's insert
        /// sent red's list as A saved it (m4 and C's m3), and the others,
        /// taking it whole, dropped scarlet's m1 and m2.
        func testAListSavedForAnUnpushedInsertThatModelsMergedIntoIsItsListNow() async throws {
            let (a, syncA, b, syncB, c, syncC) = try await threeDevicesAndRedOnC()
            try label("m1", with: "scarlet", on: a)
            try redOnNewMemos([(a, "a's", "m4")])
            try rename("scarlet", to: "red", on: b)
            try await syncB.syncNow()
            for sync in [syncA, syncB, syncC, syncA] { try await sync.syncNow() }
            try assertOneGraph([a, b, c], labels: ["label crimson (dark): m1", "label red (a's): m1,m2,m3,m4"])
        }

        /// A and B make red at once, and A's reaches the zone first. B
        /// pulls A's red after its own is pushed and before it is back:
        /// A's merges into B's here, ahead of the zone. In the zone's order
        /// B's red merges into A's, so once B's save is back, B's row is
        /// A's red, as on every other device. B then takes m1 off red, and
        /// every device ends with red's list as B holds it. Before, B sent
        /// the list for its own red, which the others took as a change to
        /// what B's red brought (m2 alone), and they kept m1. Seed 7 of the
        /// convergence test met this.
        func testListsSavedAfterAMergeAheadOfTheZoneEndedAreTheZoneModels() async throws {
            let (a, syncA, b, syncB) = try await redMadeAtOnceOnTwo(zone: "zone-\(UUID())")
            try await syncB.syncNow()
            let onB = ModelContext(b)
            let red = try XCTUnwrap(onB.fetch(FetchDescriptor<Label>()).first)
            XCTAssertEqual(red.memos.map(\.text).sorted(), ["m1", "m2"])
            red.memos.removeAll { $0.text == "m1" }
            try onB.save()
            for sync in [syncB, syncA] { try await sync.syncNow() }
            try assertOneGraph([a, b], labels: ["label red (b's): m2"])
        }

        /// The same with the list saved, and prepared, before B's save is
        /// back: B's insert waits behind A's pushes twice, B takes m1 off
        /// red in between, and A pushes again between B's two pushes. The
        /// round that pulls B's insert back readdresses the prepared list
        /// to A's red, and every device ends with it. Sent under B's own
        /// identifier, the others would take it as a change to what B's
        /// red brought (m2 alone), and keep m1.
        func testAListPreparedBeforeAMergeAheadOfTheZoneEndsIsTheZoneModels() async throws {
            let zone = "zone-\(UUID())"
            let (a, syncA) = try device("a", zone: zone)
            let (b, _) = try device("b", zone: zone)
            @Sendable func pushOnA(_ text: String) async {
                let context = ModelContext(a)
                context.insert(Memo(text: text))
                try? context.save()
                try? await syncA.syncNow()
            }
            let syncB = try hookedEngine(
                b, zone: zone,
                hooks: [
                    0: { try? await syncA.syncNow() },
                    1: {
                        let onB = ModelContext(b)
                        if let red = try? onB.fetch(FetchDescriptor<Label>()).first {
                            red.memos.removeAll { $0.text == "m1" }
                            try? onB.save()
                        }
                        await pushOnA("x")
                    },
                    3: { await pushOnA("y") },
                ])
            try redOnNewMemos([(a, "a's", "m1"), (b, "b's", "m2")])
            for sync in [syncB, syncB, syncA] { try await sync.syncNow() }
            try assertOneGraph([a, b], labels: ["label red (b's): m2"])
        }

        /// The same with a compound unique constraint: two devices move two
        /// slots to one day and hour.
        func testUpdatesCollidingOnACompoundUniqueConstraintMerge() async throws {
            for aFirst in [true, false] {
                let (a, syncA, b, syncB) = try await twoSlotsOnTwo("\(aFirst)", [(1, 9, "standup"), (2, 10, "review")])
                func move(_ note: String, on container: ModelContainer, note newNote: String) throws {
                    let context = ModelContext(container)
                    let slot = try XCTUnwrap(
                        context.fetch(FetchDescriptor<Slot>(predicate: #Predicate { $0.note == note })).first)
                    slot.day = 3
                    slot.hour = 11
                    slot.note = newNote
                    try context.save()
                }
                try move("standup", on: a, note: "from a")
                try move("review", on: b, note: "from b")
                for sync in aFirst ? [syncA, syncB] : [syncB, syncA] { try await sync.syncNow() }
                for sync in [syncA, syncB] { try await sync.syncNow() }
                for container in [a, b] {
                    let slots = try ModelContext(container).fetch(FetchDescriptor<Slot>()).map {
                        "\($0.day)/\($0.hour) \($0.note)"
                    }
                    XCTAssertEqual(slots, ["3/11 \(aFirst ? "from b" : "from a")"], "a first: \(aFirst)")
                    XCTAssertEqual(try container.checkIntegrity(), [])
                }
            }
        }

        /// B saves two slots, the later save changing the slot that A
        /// then moves into the first one's cell: B merges the two as A's
        /// move arrives, and the later save's note wins there as in the
        /// zone's order. The first slot is B's insert, not pushed (merged
        /// ahead of the zone: it goes on top of the moved one there), or
        /// B's pushed slot that B then edited.
        func testTheLaterUnpushedSaveOfTwoModelsMergingWins() async throws {
            for insertHere in [true, false] {
                let zone = "zone-\(UUID())"
                let schema = Schema([Slot.self])
                let (a, syncA) = try device("a\(insertHere)", zone: zone, schema: schema)
                let (b, syncB) = try device("b\(insertHere)", zone: zone, schema: schema)
                let onA = ModelContext(a)
                let standup = Slot(day: 1, hour: 9, note: "standup")
                onA.insert(standup)
                try onA.save()
                try await syncA.syncNow()
                try await syncB.syncNow()
                let onB = ModelContext(b)
                let first = Slot(day: 3, hour: 11, note: insertHere ? "inserted on b" : "review")
                onB.insert(first)
                try onB.save()
                if !insertHere {
                    try await syncB.syncNow()
                    first.note = "edited on b"
                    try onB.save()
                }
                let moved = try XCTUnwrap(onB.fetch(FetchDescriptor<Slot>(predicate: #Predicate { $0.day == 1 })).first)
                moved.note = "later on b"
                try onB.save()
                standup.day = 3
                standup.hour = 11
                try onA.save()
                for sync in [syncA, syncB, syncA] { try await sync.syncNow() }
                for container in [a, b] {
                    let slots = try ModelContext(container).fetch(FetchDescriptor<Slot>()).map {
                        "\($0.day)/\($0.hour) \($0.note)"
                    }
                    XCTAssertEqual(slots, ["3/11 later on b"], "inserted here: \(insertHere)")
                    XCTAssertEqual(try container.checkIntegrity(), [])
                }
            }
        }

        /// Slots `x` at 1/1 and `p` at 2/2 (or `slots`) on A and B, synced.
        func twoSlotsOnTwo(
            _ suffix: String, _ slots: [(day: Int, hour: Int, note: String)] = [(1, 1, "x"), (2, 2, "p")],
            zone: String = "zone-\(UUID())"
        ) async throws -> (ModelContainer, SyncEngine, ModelContainer, SyncEngine) {
            let schema = Schema([Slot.self])
            let (a, syncA) = try device("a\(suffix)", zone: zone, schema: schema)
            let (b, syncB) = try device("b\(suffix)", zone: zone, schema: schema)
            let onA = ModelContext(a)
            for slot in slots { onA.insert(Slot(day: slot.day, hour: slot.hour, note: slot.note)) }
            try onA.save()
            try await syncA.syncNow()
            try await syncB.syncNow()
            return (a, syncA, b, syncB)
        }

        /// The slots of `container` as "day/hour note", sorted.
        func slots(_ container: ModelContainer) throws -> [String] {
            try ModelContext(container).fetch(FetchDescriptor<Slot>()).map { "\($0.day)/\($0.hour) \($0.note)" }.sorted()
        }

        /// Syncs each device in turn, then asserts that each holds the
        /// slots `expected` and passes its integrity check.
        func assertSlots(
            _ expected: [String], afterSyncing devices: [(ModelContainer, SyncEngine)], file: StaticString = #filePath,
            line: UInt = #line
        ) async throws {
            for (_, sync) in devices { try await sync.syncNow() }
            for (container, _) in devices {
                XCTAssertEqual(try slots(container), expected, file: file, line: line)
                XCTAssertEqual(try container.checkIntegrity(), [], file: file, line: line)
            }
        }

        /// Changes `note`'s slot on `container` and saves.
        func change(_ note: String, on container: ModelContainer, _ body: (Slot, ModelContext) -> Void) throws {
            let context = ModelContext(container)
            let slot = try XCTUnwrap(context.fetch(FetchDescriptor<Slot>(predicate: #Predicate { $0.note == note })).first)
            body(slot, context)
            try context.save()
        }

        /// B moves x to 3/3, then p to 4/4, neither pushed; A moves p to
        /// 3/3 and pushes. In the zone's order x then merges into p (which
        /// took 3/3 first) and p moves on to 4/4: B merges them as A's move
        /// arrives, though neither holds 3/3 here by the zone's values.
        func testAPulledMoveIntoACellALocalSaveTookMergesThoughMovedOnHere() async throws {
            let (a, syncA, b, syncB) = try await twoSlotsOnTwo("")
            try change("x", on: b) { slot, _ in (slot.day, slot.hour) = (3, 3) }
            try change("p", on: b) { slot, _ in (slot.day, slot.hour) = (4, 4) }
            try change("p", on: a) { slot, _ in (slot.day, slot.hour) = (3, 3) }
            try await assertSlots(["4/4 p"], afterSyncing: [(a, syncA), (b, syncB), (a, syncA)])
        }

        /// B moves x to 3/3 and renames it, not pushed; A moves p to 3/3 and
        /// deletes x. B merges x into p as A's move arrives (B's save comes
        /// later in the zone's order), but the zone deletes x before that
        /// save: the two never merge there. B keeps p, with its own note.
        func testALocalModelMergedAheadThatTheZoneDeletesLeavesThePulledOne() async throws {
            let (a, syncA, b, syncB) = try await twoSlotsOnTwo("-deleted")
            try change("x", on: b) { slot, _ in
                (slot.day, slot.hour) = (3, 3)
                slot.note = "x on b"
            }
            try change("p", on: a) { slot, _ in (slot.day, slot.hour) = (3, 3) }
            try change("x", on: a) { slot, context in context.delete(slot) }
            try await assertSlots(["3/3 p"], afterSyncing: [(a, syncA), (b, syncB), (a, syncA)])
        }

        /// A inserts l at 3/3, not pushed; B inserts q at 3/3, pushes, then
        /// moves q on to 4/4 and pushes. A merges q into l as q arrives (its
        /// own save comes later in the zone's order), but in the zone q
        /// holds 4/4 by the time l arrives, and the two never merge: A parts
        /// them again once its save is in the zone.
        func testAPulledModelMergedAheadThatMovesOnBeforeTheSavePartsAgain() async throws {
            let (a, syncA, b, syncB) = try await lAndQ("parted")
            try change("q", on: b) { slot, _ in (slot.day, slot.hour) = (4, 4) }
            try await syncB.syncNow()
            try await assertSlots(["3/3 l", "4/4 q"], afterSyncing: [(a, syncA), (b, syncB), (a, syncA)])
        }

        /// The same, with A's m at 4/4 too: q parts from l and at once
        /// merges ahead into m. Once m's save is in the zone, where m merges
        /// into q, the slot is q's on A as on B.
        func testAPulledModelPartedIntoAnotherLocalOneMergesAheadThere() async throws {
            let (a, syncA, b, syncB) = try await lAndQ("parted-again")
            let onA = ModelContext(a)
            onA.insert(Slot(day: 4, hour: 4, note: "m"))
            try onA.save()
            try change("q", on: b) { slot, _ in (slot.day, slot.hour) = (4, 4) }
            try await syncB.syncNow()
            try await assertSlots(["3/3 l", "4/4 m"], afterSyncing: [(a, syncA), (b, syncB), (a, syncA)])
            func own(_ container: ModelContainer) throws -> SyncID? {
                let slot = try XCTUnwrap(
                    try ModelContext(container).fetch(FetchDescriptor<Slot>(predicate: #Predicate { $0.note == "m" })).first)
                return try SyncReplica(container: container).store.read { tx in
                    try SyncReplica.id(of: "Slot", row: slot._strataState.rowID, tx)
                }
            }
            XCTAssertEqual(try own(a), try own(b))
        }

        /// The same, but B deletes q instead of moving it: A keeps l.
        func testAPulledModelMergedAheadThatTheZoneDeletesLeavesTheLocalOne() async throws {
            let (a, syncA, b, syncB) = try await lAndQ("deleted")
            try change("q", on: b) { slot, context in context.delete(slot) }
            try await syncB.syncNow()
            try await assertSlots(["3/3 l"], afterSyncing: [(a, syncA), (b, syncB), (a, syncA)])
        }

        /// A merges q into its l ahead of the zone, then deletes the slot
        /// before it pushes: q goes on every device, as it went here.
        func testALocalDeleteOfAModelMergedAheadDeletesThePulledOne() async throws {
            let zone = "zone-\(UUID())"
            let (a, _, b, syncB) = try await lAndQ("local", zone: zone)
            // The second pull of the round finds nothing: the first one's
            // merge is in, and the outbox not prepared yet.
            let syncA = try hookedEngine(
                a, zone: zone,
                pullHooks: [
                    1: {
                        let onA = ModelContext(a)
                        for slot in (try? onA.fetch(FetchDescriptor<Slot>())) ?? [] { onA.delete(slot) }
                        try? onA.save()
                    }
                ])
            try await assertSlots([], afterSyncing: [(a, syncA), (b, syncB), (a, syncA)])
        }

        /// A holds l at 3/3, not pushed; B holds q at 3/3, pushed.
        func lAndQ(_ suffix: String, zone: String = "zone-\(UUID())") async throws -> (
            ModelContainer, SyncEngine, ModelContainer, SyncEngine
        ) {
            let schema = Schema([Slot.self])
            let (a, syncA) = try device("a-\(suffix)", zone: zone, schema: schema)
            let (b, syncB) = try device("b-\(suffix)", zone: zone, schema: schema)
            let onA = ModelContext(a)
            onA.insert(Slot(day: 3, hour: 3, note: "l"))
            try onA.save()
            let onB = ModelContext(b)
            onB.insert(Slot(day: 3, hour: 3, note: "q"))
            try onB.save()
            try await syncB.syncNow()
            return (a, syncA, b, syncB)
        }

        /// A moves p off 2/2 and then inserts n at 2/2, neither pushed; B
        /// moves p away and back to 2/2. In the zone's order p leaves 2/2
        /// before n takes it: the two never merge.
        func testACellALocalSaveTookAfterMovingThePulledModelOffStaysApart() async throws {
            let (a, syncA, b, syncB) = try await twoSlotsOnTwo("-moved-off")
            try change("p", on: a) { slot, _ in (slot.day, slot.hour) = (3, 3) }
            let onA = ModelContext(a)
            onA.insert(Slot(day: 2, hour: 2, note: "n"))
            try onA.save()
            try change("p", on: b) { slot, _ in (slot.day, slot.hour) = (5, 5) }
            try change("p", on: b) { slot, _ in (slot.day, slot.hour) = (2, 2) }
            try await syncB.syncNow()
            try await assertSlots(["1/1 x", "2/2 n", "3/3 p"], afterSyncing: [(a, syncA), (b, syncB), (a, syncA)])
        }

        /// A inserts n at 3/3, not pushed; B moves p to 3/3 and pushes. A
        /// merges n into p as the move arrives (its insert comes later in
        /// the zone's order), and its insert still reaches the zone, where
        /// n merges into p with n's values.
        func testALocalInsertMergedIntoAPulledMoveStillReachesTheZone() async throws {
            let (a, syncA, b, syncB) = try await nOnAThenPOnB("-insert-ahead")
            try await assertSlots(["1/1 x", "3/3 n"], afterSyncing: [(a, syncA), (b, syncB), (a, syncA)])
        }

        /// The same, but B moves p on to 4/4 before A pushes: in the zone's
        /// order p leaves 3/3 before n arrives, and the two never merge.
        func testALocalInsertMergedIntoAPulledModelThatMovesOnPartsAgain() async throws {
            let (a, syncA, b, syncB) = try await nOnAThenPOnB("-insert-parted")
            try change("p", on: b) { slot, _ in (slot.day, slot.hour) = (4, 4) }
            try await syncB.syncNow()
            try await assertSlots(["1/1 x", "3/3 n", "4/4 p"], afterSyncing: [(a, syncA), (b, syncB), (a, syncA)])
        }

        /// The same, but B deletes p before A pushes: n stays.
        func testALocalInsertMergedIntoAPulledModelThatTheZoneDeletesStays() async throws {
            let (a, syncA, b, syncB) = try await nOnAThenPOnB("-insert-kept")
            try change("p", on: b) { slot, context in context.delete(slot) }
            try await syncB.syncNow()
            try await assertSlots(["1/1 x", "3/3 n"], afterSyncing: [(a, syncA), (b, syncB), (a, syncA)])
        }

        /// Two devices with slots x and p (``twoSlotsOnTwo(_:_:)``); A
        /// inserts n at 3/3, not pushed, and B moves p to 3/3 and pushes.
        func nOnAThenPOnB(_ suffix: String) async throws -> (ModelContainer, SyncEngine, ModelContainer, SyncEngine) {
            let (a, syncA, b, syncB) = try await twoSlotsOnTwo(suffix)
            let onA = ModelContext(a)
            onA.insert(Slot(day: 3, hour: 3, note: "n"))
            try onA.save()
            try change("p", on: b) { slot, _ in (slot.day, slot.hour) = (3, 3) }
            try await syncB.syncNow()
            return (a, syncA, b, syncB)
        }

        /// A store whose models left the zone's gets them back at the end
        /// of the next round that applied a change while a save of its own
        /// waited, once the save is pushed: the zone copy holds the zone's
        /// models as the zone's changes alone make them. (A save authored
        /// as sync's own, which is never pushed, stands here for a merge
        /// ahead of the zone that went wrong.)
        func testARoundThatAppliedChangesAheadOfALocalSaveEndsWithTheZonesModels() async throws {
            let (a, syncA, b, syncB) = try await twoSlotsOnTwo("-aligned")
            try await leaveTheZonesModels(a, renaming: "x", b, syncB)
            try await assertSlots(["1/1 x2", "3/3 p"], afterSyncing: [(a, syncA), (b, syncB)])
            XCTAssertEqual(syncA.status.pendingChanges, 0)
        }

        /// Makes `a`'s models leave the zone's by a save authored as sync's
        /// own (a stray 7/7, p's note "wrong"), renames `x` to "x2" on `a`
        /// (not pushed), and moves p to 3/3 on `b` (pushed): `a`'s next
        /// round applies the move ahead of its save.
        func leaveTheZonesModels(_ a: ModelContainer, renaming x: String, _ b: ModelContainer, _ syncB: SyncEngine)
            async throws
        {
            let fault = ModelContext(a)
            fault.author = SyncReplica.author
            fault.insert(Slot(day: 7, hour: 7, note: "stray"))
            let p = try XCTUnwrap(fault.fetch(FetchDescriptor<Slot>(predicate: #Predicate { $0.note == "p" })).first)
            p.note = "wrong"
            try fault.save()
            try change(x, on: a) { slot, _ in slot.note = "x2" }
            try change("p", on: b) { slot, _ in (slot.day, slot.hour) = (3, 3) }
            try await syncB.syncNow()
        }

        /// An alignment of two saves (n is made once x, which stays, gives
        /// up n's cell) that a local save interrupts between them: the app
        /// is told of the first save's changes all the same, and the next
        /// round finishes the alignment.
        func testALocalSaveBetweenTheAlignmentsTwoSavesLeavesTheRestToTheNextRound() async throws {
            let (a, syncA, b, syncB) = try await twoSlotsOnTwo(
                "-two-saves", [(1, 1, "x"), (2, 2, "p"), (5, 5, "n")])
            let fault = ModelContext(a)
            fault.author = SyncReplica.author
            let all = try fault.fetch(FetchDescriptor<Slot>())
            let x = try XCTUnwrap(all.first { $0.note == "x" })
            fault.delete(try XCTUnwrap(all.first { $0.note == "n" }))
            (x.day, x.hour) = (5, 5)
            try fault.save()
            try change("p", on: a) { slot, _ in slot.note = "p2" }
            let onB = ModelContext(b)
            onB.insert(Slot(day: 6, hour: 6, note: "y"))
            try onB.save()
            try await syncB.syncNow()
            let updated = Told<PersistentIdentifier>(ModelContext.NotificationKey.updatedIdentifiers.rawValue, by: a)
            let cutIn = CutIn(a, on: ModelContext.didSave, updating: x.persistentModelID) { context in
                let p = try XCTUnwrap(context.fetch(FetchDescriptor<Slot>(predicate: #Predicate { $0.note == "p2" })).first)
                p.note = "p3"
            }
            try await syncA.syncNow()
            XCTAssertTrue(try cutIn.wasSaved())
            XCTAssertEqual(try slots(a), ["1/1 x", "2/2 p3", "6/6 y"])
            XCTAssertTrue(updated.all.contains(x.persistentModelID))
            try await assertSlots(["1/1 x", "2/2 p3", "5/5 n", "6/6 y"], afterSyncing: [(a, syncA), (b, syncB)])
        }

        /// A save of the app's that lands while a pulled change is being
        /// applied, after the apply found nothing waiting to push, is
        /// pushed all the same: the apply moves the pushed marks only past
        /// saves of its own.
        func testASaveDuringAnApplyThatFoundNothingPendingIsPushed() async throws {
            let (a, syncA, b, syncB) = try await twoSlotsOnTwo("-marks")
            try change("p", on: b) { slot, _ in slot.note = "p2" }
            try await syncB.syncNow()
            let cutIn = CutIn(a, on: ModelContext.willSave) { context in
                let x = try XCTUnwrap(context.fetch(FetchDescriptor<Slot>(predicate: #Predicate { $0.note == "x" })).first)
                x.note = "x2"
            }
            try await syncA.syncNow()
            XCTAssertTrue(try cutIn.wasSaved())
            try await assertSlots(["1/1 x2", "2/2 p2"], afterSyncing: [(b, syncB), (a, syncA)])
            XCTAssertEqual(syncA.status.pendingChanges, 0)
        }

        /// A store not aligned with its zone copy yet makes no snapshot (a
        /// trim would carry what it holds wrongly into the zone): the trim
        /// runs another round, which aligns it, and trims then.
        func testAStoreNotAlignedWithItsCopyMakesNoSnapshot() async throws {
            let zone = "zone-\(UUID())"
            let (a, syncA, _, _) = try await twoSlotsOnTwo("-unaligned-trim", zone: zone)
            let replica = try SyncReplica(container: a)
            replica.zoneCopy = try XCTUnwrap(SyncReplica.openZoneCopy(of: a, zone: zone))
            try replica.store.write { tx in try SyncReplica.setNumber("unaligned", 1, tx) }
            XCTAssertThrowsError(try replica.snapshot()) { error in
                guard case .unaligned? = error as? SyncReplica.SnapshotRefusal else { return XCTFail("\(error)") }
            }
            let through = try await syncA.trimServerHistory()
            XCTAssertEqual(through, 1)
            XCTAssertNoThrow(try replica.snapshot())
        }

        /// A zone copy whose file does not open (damaged) is made anew, and
        /// the round goes on: the store syncs, and the new copy aligns it.
        func testADamagedZoneCopyIsMadeAnew() async throws {
            try Data(repeating: 0xA5, count: 3 * 4096).write(
                to: URL(fileURLWithPath: directory.file("a-damaged-copy.store-zone")))
            let (a, syncA, b, syncB) = try await twoSlotsOnTwo("-damaged-copy")
            try await leaveTheZonesModels(a, renaming: "x", b, syncB)
            try await assertSlots(["1/1 x2", "3/3 p"], afterSyncing: [(a, syncA), (b, syncB)])
        }

        /// A zone copy out of step (as an apply that failed there leaves
        /// it) while this store holds models that are not the zone's
        /// catches up by the zone's own changes, from its snapshot when
        /// `trimmed`: made from this store's models, it held the fault too,
        /// and the alignment kept it.
        func assertACopyOutOfStepCatchesUpFromTheZone(_ suffix: String, trimmed: Bool) async throws {
            let zone = "zone-\(UUID())"
            let (a, syncA, b, syncB) = try await twoSlotsOnTwo(suffix, zone: zone)
            if trimmed {
                try change("x", on: b) { slot, _ in slot.note = "x1" }
                try await syncB.syncNow()
                try await syncA.syncNow()
                let through = try await syncB.trimServerHistory()
                XCTAssertEqual(through, 2)
            }
            try await leaveTheZonesModels(a, renaming: trimmed ? "x1" : "x", b, syncB)
            let replica = try SyncReplica(container: a)
            replica.zoneCopy = try XCTUnwrap(SyncReplica.openZoneCopy(of: a, zone: zone))
            replica.copyOutOfStep()
            try await assertSlots(["1/1 x2", "3/3 p"], afterSyncing: [(a, syncA), (b, syncB)])
            XCTAssertEqual(syncA.status.pendingChanges, 0)
        }

        /// A local model that the alignment removes is reported lost. A's
        /// insert into 5/5 went out as it was prepared, but a fault moved
        /// it to 6/6 here, so B's earlier insert into 5/5 met nothing here
        /// as it arrived; in the zone's order A's insert merges into B's.
        func testAModelTheAlignmentRemovesIsReportedLost() async throws {
            let (a, syncA, b, syncB) = try await twoSlotsOnTwo("-lost")
            let onA = ModelContext(a)
            let mine = Slot(day: 5, hour: 5, note: "mine")
            onA.insert(mine)
            try onA.save()
            let mineID = mine.persistentModelID
            _ = try SyncReplica(container: a).prepareOutbox()
            let fault = ModelContext(a)
            fault.author = SyncReplica.author
            let moved = try XCTUnwrap(fault.fetch(FetchDescriptor<Slot>(predicate: #Predicate { $0.note == "mine" })).first)
            (moved.day, moved.hour) = (6, 6)
            try fault.save()
            let onB = ModelContext(b)
            onB.insert(Slot(day: 5, hour: 5, note: "theirs"))
            try onB.save()
            try await syncB.syncNow()
            let lostOnA = Told<SyncEngine.LostChange>(SyncEngine.lostChangesKey, by: a)
            try await assertSlots(["1/1 x", "2/2 p", "5/5 mine"], afterSyncing: [(a, syncA), (b, syncB)])
            let kept = try XCTUnwrap(ModelContext(a).fetch(FetchDescriptor<Slot>(predicate: #Predicate { $0.day == 5 })).first)
            XCTAssertEqual(lostOnA.all, [SyncEngine.LostChange(model: mineID, reason: .merged(into: kept.persistentModelID))])
        }

        /// A copy that catches up from a snapshot at exactly this store's
        /// position is in step (the snapshot stands for the change the
        /// store applied there), so the round aligns: without the change
        /// recorded, it was made again from the snapshot every round, and
        /// never aligned.
        func testAZoneCopyCaughtUpFromASnapshotAtTheStoresPositionIsInStep() async throws {
            let zone = "zone-\(UUID())"
            let (a, syncA, _, syncB) = try await twoSlotsOnTwo("-snapshot-at-position", zone: zone)
            try await syncB.syncNow()
            let through = try await syncB.trimServerHistory()
            XCTAssertEqual(through, 1)
            let replica = try SyncReplica(container: a)
            replica.zoneCopy = try XCTUnwrap(SyncReplica.openZoneCopy(of: a, zone: zone))
            replica.copyOutOfStep()
            let fault = ModelContext(a)
            fault.author = SyncReplica.author
            fault.insert(Slot(day: 7, hour: 7, note: "stray"))
            try fault.save()
            try replica.store.write { tx in try SyncReplica.setNumber("unaligned", 1, tx) }
            try await syncA.syncNow()
            XCTAssertEqual(try slots(a), ["1/1 x", "2/2 p"])
            XCTAssertEqual(try replica.store.read { tx in try SyncReplica.number("unaligned", tx) }, 0)
        }

        func testAZoneCopyOutOfStepCatchesUpByTheZonesChanges() async throws {
            try await assertACopyOutOfStepCatchesUpFromTheZone("-catch-up", trimmed: false)
        }

        func testAZoneCopyOutOfStepCatchesUpFromTheZonesSnapshot() async throws {
            try await assertACopyOutOfStepCatchesUpFromTheZone("-catch-up-trimmed", trimmed: true)
        }

        /// A change that updates a model the zone never held (a model a
        /// device merged ahead of the zone, named by its saves since) changes
        /// nothing: no device makes a model of it, none sets it aside.
        func testAnUpdateOfAModelTheZoneNeverHeldChangesNothing() async throws {
            let zone = "zone-\(UUID())"
            let schema = Schema([Slot.self])
            let (a, syncA) = try device("a-never-held", zone: zone, schema: schema)
            let (b, syncB) = try device("b-never-held", zone: zone, schema: schema)
            let onA = ModelContext(a)
            onA.insert(Slot(day: 1, hour: 1, note: "x"))
            onA.insert(Slot(day: 2, hour: 2, note: "y"))
            try onA.save()
            try await syncA.syncNow()
            // x's insert, made an update of a new identifier that moves it
            // to day 2 (y's day).
            let inserts = try serverChange(zone, seq: 1).changes
            XCTAssertEqual(inserts.count, 2)
            let (x, y) =
                try inserts[0].fields.contains { $0.value.contains(UInt8(ascii: "x")) }
                ? (inserts[0], inserts[1]) : (inserts[1], inserts[0])
            var update = x
            update.kind = .update
            update.id = SyncID.make()
            update.fields = try x.fields.map { field in
                field.name == "day" ? try XCTUnwrap(y.fields.first { $0.name == "day" }) : field
            }
            var set = SyncChangeSet()
            set.changes = [update]
            try pushPayload(zone, set.encode())
            for (container, sync) in [(a, syncA), (b, syncB)] {
                try await sync.syncNow()
                XCTAssertEqual(try slots(container), ["1/1 x", "2/2 y"])
                XCTAssertEqual(sync.status.setAside, [])
                XCTAssertEqual(sync.status.serverPosition, 2)
            }
        }

        /// A moves x to 3/3, not pushed; B moves p to 3/3, then x to 5/5,
        /// and pushes. A merges x into p as p's move arrives; x's own move
        /// is no move of p, and in the zone's order A's save brings x back
        /// into p's cell: one slot everywhere.
        func testAZoneMoveOfTheLocalModelMergedAheadKeepsTheMerge() async throws {
            let (a, syncA, b, syncB) = try await twoSlotsOnTwo("-loser-moved")
            try change("x", on: a) { slot, _ in (slot.day, slot.hour) = (3, 3) }
            try change("p", on: b) { slot, _ in (slot.day, slot.hour) = (3, 3) }
            try await syncB.syncNow()
            try change("x", on: b) { slot, _ in (slot.day, slot.hour) = (5, 5) }
            try await syncB.syncNow()
            try await assertSlots(["3/3 p"], afterSyncing: [(a, syncA), (b, syncB), (a, syncA)])
        }

        /// A zone change that gives two models the cell of a third, which
        /// it deletes and B moved away in a save not pushed yet (as a
        /// snapshot does for two identifiers of one model, or a damaged
        /// device might): B merges the two, and does not stop.
        func testAChangeGivingTwoModelsTheCellOfOneItDeletesMergesThem() async throws {
            let (a, syncA, b, syncB) = try await twoSlotsOnTwo("-crafted")
            let onA = ModelContext(a)
            onA.insert(Slot(day: 3, hour: 3, note: "h"))
            try onA.save()
            try await syncA.syncNow()
            try await syncB.syncNow()
            try change("h", on: b) { slot, _ in (slot.day, slot.hour) = (4, 4) }
            let replica = try SyncReplica(container: b)
            var ids: [String: SyncID] = [:]
            for slot in try ModelContext(b).fetch(FetchDescriptor<Slot>()) {
                ids[slot.note] = try replica.store.read { tx in
                    try SyncReplica.id(of: "Slot", row: slot._strataState.rowID, tx)
                }
            }
            // 3, zigzag-encoded.
            let cell = [SyncChangeSet.Field(name: "day", wire: 0, value: [6]), .init(name: "hour", wire: 0, value: [6])]
            let set = SyncChangeSet(changes: [
                .init(kind: .delete, entity: "Slot", id: try XCTUnwrap(ids["h"])),
                .init(kind: .update, entity: "Slot", id: try XCTUnwrap(ids["x"]), fields: cell),
                .init(kind: .update, entity: "Slot", id: try XCTUnwrap(ids["p"]), fields: cell),
            ])
            try replica.apply(seq: syncB.status.serverPosition + 1, set: set, own: nil, replay: false)
            XCTAssertEqual(try slots(b).map { $0.prefix(3) }, ["3/3"])
            XCTAssertEqual(try b.checkIntegrity(), [])
        }

        /// A snapshot names a model merged on a unique value once per
        /// identifier, each an insert of its values, while B moved that
        /// model on in a save not pushed yet: both identifiers are the one
        /// model B moved.
        func testASnapshotsTwoIdentifiersOfAModelMovedHereStayOneModel() async throws {
            let (a, syncA, b, syncB) = try await twoSlotsOnTwo("-snapshot")
            try change("x", on: b) { slot, _ in (slot.day, slot.hour) = (4, 4) }
            let replica = try SyncReplica(container: b)
            let x = try XCTUnwrap(
                try ModelContext(b).fetch(FetchDescriptor<Slot>(predicate: #Predicate { $0.note == "x" })).first)
            let id = try XCTUnwrap(
                try replica.store.read { tx in try SyncReplica.id(of: "Slot", row: x._strataState.rowID, tx) })
            // 3, zigzag-encoded; the note "x".
            let fields = [
                SyncChangeSet.Field(name: "day", wire: 0, value: [6]), .init(name: "hour", wire: 0, value: [6]),
                .init(name: "note", wire: 2, value: [1, 0x78]),
            ]
            let set = SyncChangeSet(changes: [
                .init(kind: .insert, entity: "Slot", id: id, fields: fields),
                .init(kind: .insert, entity: "Slot", id: SyncID.make(), fields: fields),
            ])
            try replica.apply(seq: syncB.status.serverPosition + 1, set: set, own: nil, replay: false)
            XCTAssertEqual(try slots(b), ["2/2 p", "4/4 x"])
            XCTAssertEqual(try b.checkIntegrity(), [])
            _ = (a, syncA)
        }

        /// B merges its unpushed n into p, which took n's cell first; a
        /// zone change then moves p on and gives the cell to a new slot X
        /// in one set. n parts from p and X merges into n: B does not stop.
        func testASetThatMovesAPulledModelOffAndFillsItsCellMergesThePartedModel() async throws {
            let (_, _, b, syncB) = try await twoSlotsOnTwo("-refilled")
            let onB = ModelContext(b)
            onB.insert(Slot(day: 3, hour: 3, note: "n"))
            try onB.save()
            let replica = try SyncReplica(container: b)
            _ = try replica.prepareOutbox()
            let p = try XCTUnwrap(
                try ModelContext(b).fetch(FetchDescriptor<Slot>(predicate: #Predicate { $0.note == "p" })).first)
            let id = try XCTUnwrap(
                try replica.store.read { tx in try SyncReplica.id(of: "Slot", row: p._strataState.rowID, tx) })
            // 3 and 4, zigzag-encoded.
            func cell(_ value: UInt8) -> [SyncChangeSet.Field] {
                [.init(name: "day", wire: 0, value: [value]), .init(name: "hour", wire: 0, value: [value])]
            }
            let position = syncB.status.serverPosition
            try replica.apply(
                seq: position + 1, set: SyncChangeSet(changes: [.init(kind: .update, entity: "Slot", id: id, fields: cell(6))]),
                own: nil, replay: false)
            XCTAssertEqual(try slots(b), ["1/1 x", "3/3 n"])
            let set = SyncChangeSet(changes: [
                .init(kind: .update, entity: "Slot", id: id, fields: cell(8)),
                .init(
                    kind: .insert, entity: "Slot", id: SyncID.make(),
                    fields: cell(6) + [.init(name: "note", wire: 2, value: [1, 0x58])]),
            ])
            try replica.apply(seq: position + 2, set: set, own: nil, replay: false)
            XCTAssertEqual(try slots(b), ["1/1 x", "3/3 n", "4/4 p"])
            XCTAssertEqual(try b.checkIntegrity(), [])
        }

        func testRelationshipsSyncByGlobalIdentity() async throws {
            let zone = "zone-\(UUID())"
            let (a, syncA) = try device("a", zone: zone)
            let (b, syncB) = try device("b", zone: zone)
            let context = ModelContext(a)
            let work = Folder(name: "work")
            let urgent = Label(name: "urgent")
            let later = Label(name: "later")
            context.insert(work)
            let first = Memo(text: "first", folder: work)
            let second = Memo(text: "second", folder: work)
            context.insert(first)
            context.insert(second)
            first.labels = [urgent, later]
            try context.save()
            try await syncA.syncNow()
            try await syncB.syncNow()
            XCTAssertEqual(
                try dump(b),
                [
                    "folder work: first,second", "label later: first", "label urgent: first",
                    "memo first in work labels later,urgent", "memo second in work labels ",
                ])
            XCTAssertEqual(try dump(b), try dump(a))

            // On b: a new folder takes the second memo, a label comes off the
            // first; a's graph follows.
            let onB = ModelContext(b)
            let home = Folder(name: "home")
            onB.insert(home)
            let memos = try onB.fetch(FetchDescriptor<Memo>(sortBy: [SortDescriptor(\.text)]))
            memos[1].folder = home
            memos[0].labels.removeAll { $0.name == "later" }
            try onB.save()
            try await syncB.syncNow()
            try await syncA.syncNow()
            XCTAssertEqual(
                try dump(a),
                [
                    "folder home: second", "folder work: first", "label later: ", "label urgent: first",
                    "memo first in work labels urgent", "memo second in home labels ",
                ])
            XCTAssertEqual(try dump(a), try dump(b))
        }

        func testARelationshipToAModelOfALaterSaveArrivesWithThatSave() async throws {
            let zone = "zone-\(UUID())"
            let (a, syncA) = try device("a", zone: zone)
            let (b, syncB) = try device("b", zone: zone)
            let context = ModelContext(a)
            let memo = Memo(text: "loose")
            context.insert(memo)
            try context.save()
            // The first save is pushed after this one: it reads the memo as
            // it is now, in a folder the zone does not know yet, and leaves
            // the folder to the second save, which made it.
            let folder = Folder(name: "late")
            context.insert(folder)
            memo.folder = folder
            try context.save()
            try await syncA.syncNow()
            try await syncB.syncNow()
            XCTAssertEqual(try dump(b), ["folder late: loose", "memo loose in late labels "])
            XCTAssertEqual(syncA.status.serverPosition, 2)
        }

        /// A device renamed a label away from "red" in a save it has not
        /// pushed, then pulls another device's rename of a second label to
        /// "red": in the zone, the first label held "red" then, so every
        /// other device merges the two. This one does too (it keeps the
        /// zone's values of unique constraints), and its rename, pushed
        /// after, names the merged label everywhere.
        func testARenameCollidingWithAValueRenamedAwayLocallyMergesToo() async throws {
            let zone = "zone-\(UUID())"
            let (a, syncA) = try device("a", zone: zone)
            let (b, syncB) = try device("b", zone: zone)
            let (c, syncC) = try device("c", zone: zone)
            let onB = ModelContext(b)
            let memo2 = Memo(text: "m2")
            onB.insert(memo2)
            memo2.labels = [Label(name: "blue")]
            try onB.save()
            try await syncB.syncNow()
            try await syncC.syncNow()
            // B renames its label to "red", not knowing A's.
            try rename("blue", to: "red", on: b)
            try await syncA.syncNow()
            let onA = ModelContext(a)
            let memo1 = Memo(text: "m1")
            onA.insert(memo1)
            memo1.labels = [Label(name: "red")]
            try onA.save()
            try await syncA.syncNow()
            // C takes A's label and renames it away, not pushing yet.
            try await syncC.syncNow()
            try rename("red", to: "crimson", on: c)
            try await syncB.syncNow()
            try await syncC.syncNow()
            for sync in [syncA, syncB, syncC, syncA, syncB] { try await sync.syncNow() }
            let expected = ["label crimson: m1,m2", "memo m1 in - labels crimson", "memo m2 in - labels crimson"]
            for (name, container) in [("a", a), ("b", b), ("c", c)] {
                XCTAssertEqual(try dump(container), expected, name)
                XCTAssertEqual(try container.checkIntegrity(), [])
            }
            for sync in [syncA, syncB, syncC] { XCTAssertNil(sync.status.lastError) }
        }

        func testACascadeReachesAModelAddedConcurrentlyOnAnotherDevice() async throws {
            let zone = "zone-\(UUID())"
            let (a, syncA) = try device("a", zone: zone)
            let (b, syncB) = try device("b", zone: zone)
            let context = ModelContext(a)
            let doomed = Folder(name: "doomed")
            context.insert(doomed)
            context.insert(Memo(text: "old", folder: doomed))
            context.insert(Folder(name: "other"))
            try context.save()
            try await syncA.syncNow()
            try await syncB.syncNow()

            // a deletes the folder (its memo goes by cascade); b, not yet
            // knowing, files a new memo in it.
            let onA = ModelContext(a)
            onA.delete(try onA.fetch(FetchDescriptor<Folder>(predicate: #Predicate { $0.name == "doomed" }))[0])
            try onA.save()
            let onB = ModelContext(b)
            let folder = try onB.fetch(FetchDescriptor<Folder>(predicate: #Predicate { $0.name == "doomed" }))[0]
            onB.insert(Memo(text: "new", folder: folder))
            try onB.save()

            let lostOnB = Told<SyncEngine.LostChange>(SyncEngine.lostChangesKey, by: b)
            // b's memo reaches the server first: a applies it while its own
            // delete of the folder is still pending, and the cascade that
            // delete will have everywhere takes the memo on a too.
            try await syncB.syncNow()
            try await syncA.syncNow()
            try await syncB.syncNow()
            XCTAssertEqual(try dump(a), ["folder other: "])
            XCTAssertEqual(try dump(b), ["folder other: "])
            // B's memo was in the zone before the delete took it: a later
            // delete, not a lost change.
            XCTAssertEqual(lostOnB.all, [])
        }

        func testACascadeReachesAModelTheOtherDevicePushedFirst() async throws {
            let zone = "zone-\(UUID())"
            let (a, syncA) = try device("a", zone: zone)
            let (b, syncB) = try device("b", zone: zone)
            let context = ModelContext(a)
            context.insert(Folder(name: "doomed"))
            try context.save()
            try await syncA.syncNow()
            try await syncB.syncNow()
            let onA = ModelContext(a)
            onA.delete(try onA.fetch(FetchDescriptor<Folder>())[0])
            try onA.save()
            let onB = ModelContext(b)
            onB.insert(Memo(text: "new", folder: try onB.fetch(FetchDescriptor<Folder>())[0]))
            try onB.save()
            let memo = try onB.fetch(FetchDescriptor<Memo>())[0].persistentModelID
            // The other order: a's delete first, then b's memo in the
            // deleted folder (prepared before b saw the delete). B is told
            // that the memo it saved is gone; a is not, nothing of its own
            // was lost.
            let lostOnA = Told<SyncEngine.LostChange>(SyncEngine.lostChangesKey, by: a)
            let lostOnB = Told<SyncEngine.LostChange>(SyncEngine.lostChangesKey, by: b)
            try await syncA.syncNow()
            try await syncB.syncNow()
            try await syncA.syncNow()
            XCTAssertEqual(try dump(a), [])
            XCTAssertEqual(try dump(b), [])
            XCTAssertEqual(lostOnB.all, [SyncEngine.LostChange(model: memo, reason: .deleted)])
            XCTAssertEqual(lostOnA.all, [])
        }
    }
#endif
#if Sync
    extension SyncRelationshipTests {
        func testAMemoMovedOutOfAFolderSurvivesTheFolderDeletedLater() async throws {
            let zone = "zone-\(UUID())"
            let (a, syncA) = try device("a", zone: zone)
            let (c, syncC) = try device("c", zone: zone)
            let context = ModelContext(a)
            let folder = Folder(name: "f22")
            context.insert(folder)
            context.insert(Memo(text: "m15", folder: folder))
            try context.save()
            try await syncA.syncNow()
            try await syncC.syncNow()
            let onC = ModelContext(c)
            let memo = try onC.fetch(FetchDescriptor<Memo>())[0]
            memo.folder = nil
            try onC.save()
            let f22 = try onC.fetch(FetchDescriptor<Folder>())[0]
            onC.insert(Memo(text: "m39", folder: f22))
            try onC.save()
            onC.delete(f22)
            try onC.save()
            try await syncC.syncNow()
            try await syncA.syncNow()
            XCTAssertEqual(try dump(c), ["memo m15 in - labels "])
            XCTAssertEqual(try dump(a), ["memo m15 in - labels "])
        }
    }
#endif
