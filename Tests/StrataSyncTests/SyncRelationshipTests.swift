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
                lines.append("memo \(memo.text) in \(memo.folder?.name ?? "-") labels \(labels)")
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

            // b's memo reaches the server first: a applies it while its own
            // delete of the folder is still pending, and the cascade that
            // delete will have everywhere takes the memo on a too.
            try await syncB.syncNow()
            try await syncA.syncNow()
            try await syncB.syncNow()
            XCTAssertEqual(try dump(a), ["folder other: "])
            XCTAssertEqual(try dump(b), ["folder other: "])
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
            // The other order: a's delete first, then b's memo in the
            // deleted folder (prepared before b saw the delete).
            try await syncA.syncNow()
            try await syncB.syncNow()
            try await syncA.syncNow()
            XCTAssertEqual(try dump(a), [])
            XCTAssertEqual(try dump(b), [])
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
