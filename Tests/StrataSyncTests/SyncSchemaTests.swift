#if Sync
    import Foundation
    import Strata
    @testable import StrataSync
    import StrataTesting
    import XCTest

    /// The first version of an app's schema.
    enum MemoV1: VersionedSchema {
        static let versionIdentifier = Schema.Version(1, 0, 0)
        static var models: [any PersistentModel.Type] { [Memo.self] }

        @Model
        final class Memo {
            @Attribute(.unique) var key: String
            var text: String
            var pinned: Bool = false

            init(key: String, text: String) {
                self.key = key
                self.text = text
            }
        }
    }

    /// The next version: an attribute with a default, an optional one, a
    /// relationship, and a new entity (all additive).
    enum MemoV2: VersionedSchema {
        static let versionIdentifier = Schema.Version(2, 0, 0)
        static var models: [any PersistentModel.Type] { [Memo.self, Label.self] }

        @Model
        final class Memo {
            @Attribute(.unique) var key: String
            var text: String
            var pinned: Bool = false
            var color: String = "none"
            var due: Date?
            var label: Label?

            init(key: String, text: String, color: String = "none") {
                self.key = key
                self.text = text
                self.color = color
            }
        }

        @Model
        final class Label {
            var name: String
            init(name: String) { self.name = name }
        }
    }

    /// A version that cannot share a zone with V1: `text` changed type.
    enum MemoRetyped: VersionedSchema {
        static let versionIdentifier = Schema.Version(9, 0, 0)
        static var models: [any PersistentModel.Type] { [Memo.self] }

        @Model
        final class Memo {
            @Attribute(.unique) var key: String
            var text: Int
            var pinned: Bool = false

            init(key: String, text: Int) {
                self.key = key
                self.text = text
            }
        }
    }

    /// A version that cannot share a zone with V1: a required attribute,
    /// with no default, that V1's inserts cannot fill.
    enum MemoRequired: VersionedSchema {
        static let versionIdentifier = Schema.Version(9, 1, 0)
        static var models: [any PersistentModel.Type] { [Memo.self] }

        @Model
        final class Memo {
            @Attribute(.unique) var key: String
            var text: String
            var pinned: Bool = false
            var owner: String

            init(key: String, text: String, owner: String) {
                self.key = key
                self.text = text
                self.owner = owner
            }
        }
    }

    /// Devices on different versions of a schema in one zone.
    final class SyncSchemaTests: SyncTestCase {
        func memosV1(_ container: ModelContainer) throws -> [String] {
            try ModelContext(container).fetch(FetchDescriptor<MemoV1.Memo>(sortBy: [SortDescriptor(\.key)])).map {
                "\($0.key)|\($0.text)|\($0.pinned)"
            }
        }

        func memosV2(_ container: ModelContainer) throws -> [String] {
            try ModelContext(container).fetch(FetchDescriptor<MemoV2.Memo>(sortBy: [SortDescriptor(\.key)])).map {
                "\($0.key)|\($0.text)|\($0.pinned)|\($0.color)|\($0.label?.name ?? "-")"
            }
        }

        /// A V1 device and the V2 device `new` share a zone; returns the V1
        /// device's position once it stopped.
        func olderDevice(zone: String, new: ModelContainer, syncNew: SyncEngine) async throws -> Int64 {
            let (old, syncOld) = try device("old", zone: zone, schema: Schema(versionedSchema: MemoV1.self))

            // The older device's insert reaches the newer one with the
            // defaults of what it lacks.
            let onOld = ModelContext(old)
            onOld.insert(MemoV1.Memo(key: "a", text: "from old"))
            try onOld.save()
            try await syncOld.syncNow()
            try await syncNew.syncNow()
            XCTAssertEqual(try memosV2(new), ["a|from old|false|none|-"])

            // The newer device sets what only it knows, and inserts a model
            // of an entity the older one lacks.
            let onNew = ModelContext(new)
            let label = MemoV2.Label(name: "work")
            onNew.insert(label)
            let b = MemoV2.Memo(key: "b", text: "from new", color: "red")
            onNew.insert(b)
            b.label = label
            try onNew.fetch(FetchDescriptor<MemoV2.Memo>(predicate: #Predicate { $0.key == "a" }))[0].color = "blue"
            try onNew.save()
            try await syncNew.syncNow()
            try await syncOld.syncNow()
            XCTAssertNil(syncOld.status.lastError)
            XCTAssertEqual(try memosV1(old), ["a|from old|false", "b|from new|false"])

            // The older device's update leaves the attributes it lacks alone.
            let memoB = try onOld.fetch(FetchDescriptor<MemoV1.Memo>(predicate: #Predicate { $0.key == "b" }))[0]
            memoB.text = "edited on old"
            memoB.pinned = true
            try onOld.save()
            try await syncOld.syncNow()
            try await syncNew.syncNow()
            XCTAssertEqual(try memosV2(new), ["a|from old|false|blue|-", "b|edited on old|true|red|work"])
            await syncOld.stop()
            engines.removeAll { $0 === syncOld }
            return syncOld.status.serverPosition
        }

        func testAdditiveVersionsShareAZoneAndAnOlderDeviceKeepsWhatItDoesNotKnow() async throws {
            let zone = "zone-\(UUID())"
            let (new, syncNew) = try device("new", zone: zone, schema: Schema(versionedSchema: MemoV2.self))
            // The older device, in a scope of its own: its container closes
            // before the migration below opens the store again.
            let position = try await olderDevice(zone: zone, new: new, syncNew: syncNew)

            // The older device migrates to V2: what it kept for V2 arrives,
            // and the sync position stays.
            let (upgraded, syncUpgraded) = try device("old", zone: zone, schema: Schema(versionedSchema: MemoV2.self))
            XCTAssertEqual(syncUpgraded.status.serverPosition, position, "the migration keeps the position")
            XCTAssertEqual(try memosV2(upgraded), try memosV2(new))
            XCTAssertEqual(try ModelContext(upgraded).fetchCount(FetchDescriptor<MemoV2.Label>()), 1)
            try await syncUpgraded.syncNow()
            XCTAssertEqual(syncUpgraded.status.serverPosition, position, "nothing was pushed for the migration")
            XCTAssertEqual(try memosV2(upgraded), try memosV2(new))

            // And both go on syncing on one version.
            let onUpgraded = ModelContext(upgraded)
            let work = try XCTUnwrap(onUpgraded.fetch(FetchDescriptor<MemoV2.Label>()).first)
            try XCTUnwrap(onUpgraded.fetch(FetchDescriptor<MemoV2.Memo>(predicate: #Predicate { $0.key == "a" })).first)
                .label = work
            try onUpgraded.save()
            try await syncUpgraded.syncNow()
            try await syncNew.syncNow()
            XCTAssertEqual(try memosV2(new), ["a|from old|false|blue|work", "b|edited on old|true|red|work"])
            XCTAssertEqual(try memosV2(upgraded), try memosV2(new))
        }

        func testAnIncompatibleSchemaIsATypedErrorAndWritesNothing() async throws {
            let zone = "zone-\(UUID())"
            let (first, syncFirst) = try device("first", zone: zone, schema: Schema(versionedSchema: MemoV1.self))
            let context = ModelContext(first)
            context.insert(MemoV1.Memo(key: "a", text: "one"))
            try context.save()
            try await syncFirst.syncNow()

            for (name, schema, reason) in [
                ("retyped", Schema(versionedSchema: MemoRetyped.self), "Memo.text is Int here and String"),
                ("required", Schema(versionedSchema: MemoRequired.self), "Memo.owner is required here"),
            ] {
                let (container, engine) = try device(name, zone: zone, schema: schema)
                let local = ModelContext(container)
                if name == "retyped" {
                    local.insert(MemoRetyped.Memo(key: "x", text: 1))
                } else {
                    local.insert(MemoRequired.Memo(key: "x", text: "t", owner: "o"))
                }
                try local.save()
                do {
                    try await engine.syncNow()
                    XCTFail("\(name): an incompatible schema synced")
                } catch {
                    XCTAssertEqual(error.code, .incompatibleSchema, "\(name): \(error)")
                    XCTAssertTrue(error.message.contains(reason), "\(name): \(error.message)")
                }
                XCTAssertEqual(engine.status.lastError?.code, .incompatibleSchema, name)
                XCTAssertEqual(engine.status.serverPosition, 0, "\(name): nothing pulled")
                let count =
                    name == "retyped"
                    ? try ModelContext(container).fetchCount(FetchDescriptor<MemoRetyped.Memo>())
                    : try ModelContext(container).fetchCount(FetchDescriptor<MemoRequired.Memo>())
                XCTAssertEqual(count, 1, "\(name): its own model only")
                // Local saves go on.
                if name == "retyped" {
                    local.insert(MemoRetyped.Memo(key: "y", text: 2))
                } else {
                    local.insert(MemoRequired.Memo(key: "y", text: "t", owner: "o"))
                }
                try local.save()
            }
            // Nothing reached the zone, and its first device goes on.
            try await syncFirst.syncNow()
            XCTAssertEqual(syncFirst.status.serverPosition, 1)
            XCTAssertEqual(try memosV1(first), ["a|one|false"])
        }

        func testDescriptionsFromTheServerAreChecked() throws {
            let described = SyncSchema(Schema(versionedSchema: MemoV2.self))
            XCTAssertEqual(try SyncSchema.parse(described.text), described)
            XCTAssertTrue(described.text.contains("A color String o"), described.text)
            XCTAssertTrue(described.text.contains("A text String r"), described.text)
            XCTAssertTrue(described.text.contains("R label Label 1"), described.text)
            XCTAssertTrue(described.conflicts(with: SyncSchema(Schema(versionedSchema: MemoV1.self))).isEmpty)
            for bad in [
                "A text String r",  // an attribute before any entity
                "E Memo\nE Memo",  // an entity twice
                "E Memo\nA text String maybe",
                "E Memo\nR label Label 2",
                "X what",
                "E " + String(repeating: "n", count: 2000),
            ] {
                XCTAssertThrowsError(try SyncSchema.parse(bad), bad)
            }
            XCTAssertThrowsError(try SyncSchema.parse(String(repeating: "E a\n", count: 2 << 20)))
        }
    }
#endif
