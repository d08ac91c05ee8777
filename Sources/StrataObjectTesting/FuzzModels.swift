import Foundation
import Strata

// The models of the object-store fuzz target: every attribute kind the
// record format distinguishes, a unique constraint and indexes, and each
// relationship storage (a to-one with its reverse index, a to-many read
// through that index with cascade, a one-to-one with cascade, and a
// many-to-many joined in `j.`/`m.` trees). `FuzzSchemaV0` is an older
// version of them, which these models migrate from without a plan.

/// A stored enum (raw-value coded).
enum FuzzStatus: String, Codable, CaseIterable {
    case draft, active, archived
}

/// A stored Codable struct, with a nested optional.
struct FuzzPoint: Codable, Equatable {
    var x: Double
    var y: Double
    var label: String?
}

@Model
final class FuzzOwner {
    #Unique<FuzzOwner>([\.email])
    #Index<FuzzOwner>([\.name], [\.age], [\.name, \.joined])

    @Attribute(.preserveValueOnDeletion, originalName: "fullName")
    var name: String
    var email: String
    var age: Int
    var score: Double
    var joined: Date
    var active: Bool
    var nickname: String?
    var status: FuzzStatus
    var home: FuzzPoint
    @Attribute(.externalStorage)
    var avatar: Data
    var aliases: [String] = [String]()

    @Relationship(deleteRule: .cascade, inverse: \FuzzItem.owner)
    var items: [FuzzItem] = [FuzzItem]()

    @Relationship(deleteRule: .cascade, inverse: \FuzzProfile.owner)
    var profile: FuzzProfile?

    @Relationship(inverse: \FuzzTag.owners)
    var tags: [FuzzTag] = [FuzzTag]()

    init(seed: Int) {
        name = "owner-\(seed % 10)"
        email = "o\(seed)@example.com"
        age = 18 + seed * 7 % 60
        score = Double(seed) / 8 - 1
        joined = Date(timeIntervalSinceReferenceDate: 700_000_000 + Double(seed) * 86_400)
        active = seed % 3 != 0
        nickname = seed % 2 == 0 ? nil : "nick \(seed) ✓"
        status = FuzzStatus.allCases[seed % 3]
        home = FuzzPoint(x: Double(seed), y: -Double(seed) / 3, label: seed % 4 == 0 ? nil : "p\(seed)")
        avatar = Data()
        aliases = (0..<seed % 3).map { "alias \($0)" }
    }
}

@Model
final class FuzzItem {
    #Index<FuzzItem>([\.rank])

    var title: String
    var rank: Int
    var done: Bool
    var due: Date?
    var owner: FuzzOwner?

    init(title: String, rank: Int) {
        self.title = title
        self.rank = rank
        done = rank % 2 == 0
        due = rank % 3 == 0 ? nil : Date(timeIntervalSinceReferenceDate: 710_000_000 + Double(rank) * 3_600)
    }
}

@Model
final class FuzzProfile {
    var bio: String
    var owner: FuzzOwner?

    init(bio: String) { self.bio = bio }
}

@Model
final class FuzzTag {
    #Unique<FuzzTag>([\.label])

    var label: String
    var weight: Double?
    var owners: [FuzzOwner] = [FuzzOwner]()

    init(label: String, weight: Double?) {
        self.label = label
        self.weight = weight
    }
}

/// The fuzz models as they were: these migrate to the current ones without
/// a plan (a rename, an attribute removed, one added with a default and one
/// optional, non-optional → optional, an index renamed, an index and a
/// unique constraint added), so the records, the derived trees and the
/// stored schema of a store of this version are read and rewritten when
/// the current models open it.
enum FuzzSchemaV0: VersionedSchema {
    static var versionIdentifier: Schema.Version { Schema.Version(0, 9, 0) }
    static var models: [any PersistentModel.Type] { [FuzzOwner.self, FuzzItem.self, FuzzProfile.self, FuzzTag.self] }

    @Model
    final class FuzzOwner {
        #Index<FuzzOwner>([\.fullName])

        var fullName: String
        var email: String
        var age: Int
        var score: Double
        var joined: Date
        var active: Bool
        var status: FuzzStatus
        var home: FuzzPoint
        var legacy: String
        @Attribute(.externalStorage)
        var avatar: Data

        @Relationship(deleteRule: .cascade, inverse: \FuzzItem.owner)
        var items: [FuzzItem] = [FuzzItem]()

        @Relationship(deleteRule: .cascade, inverse: \FuzzProfile.owner)
        var profile: FuzzProfile?

        @Relationship(inverse: \FuzzTag.owners)
        var tags: [FuzzTag] = [FuzzTag]()

        init(seed: Int) {
            fullName = "owner-\(seed % 10)"
            email = "o\(seed)@example.com"
            age = 18 + seed * 7 % 60
            score = Double(seed) / 8 - 1
            joined = Date(timeIntervalSinceReferenceDate: 700_000_000 + Double(seed) * 86_400)
            active = seed % 3 != 0
            status = FuzzStatus.allCases[seed % 3]
            home = FuzzPoint(x: Double(seed), y: 0, label: nil)
            legacy = "legacy \(seed)"
            avatar = Data(repeating: UInt8(seed), count: seed % 2 == 0 ? 0 : 90)
        }
    }

    @Model
    final class FuzzItem {
        var title: String
        var rank: Int
        var done: Bool
        var due: Date?
        var owner: FuzzOwner?

        init(title: String, rank: Int) {
            self.title = title
            self.rank = rank
            done = rank % 2 == 0
        }
    }

    @Model
    final class FuzzProfile {
        var bio: String
        var owner: FuzzOwner?

        init(bio: String) { self.bio = bio }
    }

    @Model
    final class FuzzTag {
        #Unique<FuzzTag>([\.label])

        var label: String
        var weight: Double
        var owners: [FuzzOwner] = [FuzzOwner]()

        init(label: String, weight: Double) {
            self.label = label
            self.weight = weight
        }
    }
}

/// A fuzz model whose loaded relationships can be cut.
///
/// Related models refer to each other both ways (an owner to its items,
/// each item to its owner), so a graph of loaded models outlives its
/// context unless its cycles are cut; the harness cuts them after each
/// input, so that a long fuzzing run does not grow by every graph it loads.
protocol FuzzGraphNode: AnyObject {
    /// Empties the relationships' stored values directly (no setter: no
    /// inverse update, no change tracking, no load) and returns the models
    /// they held.
    func cutRelationships() -> [AnyObject]
}

extension FuzzOwner: FuzzGraphNode {
    func cutRelationships() -> [AnyObject] {
        defer {
            _items = []
            _profile = nil
            _tags = []
        }
        return _items + (_profile.map { [$0] } ?? []) + _tags
    }
}

extension FuzzItem: FuzzGraphNode {
    func cutRelationships() -> [AnyObject] {
        defer { _owner = nil }
        return _owner.map { [$0] } ?? []
    }
}

extension FuzzProfile: FuzzGraphNode {
    func cutRelationships() -> [AnyObject] {
        defer { _owner = nil }
        return _owner.map { [$0] } ?? []
    }
}

extension FuzzTag: FuzzGraphNode {
    func cutRelationships() -> [AnyObject] {
        defer { _owners = [] }
        return _owners
    }
}

/// Cuts the relationships of `roots` and of every model reachable from
/// them through loaded relationships.
func cutCycles(_ roots: [AnyObject]) {
    var seen = Set<ObjectIdentifier>()
    var pending = roots
    while let model = pending.popLast() {
        guard seen.insert(ObjectIdentifier(model)).inserted, let node = model as? FuzzGraphNode else { continue }
        pending += node.cutRelationships()
    }
}

extension FuzzSchemaV0.FuzzOwner: FuzzGraphNode {
    func cutRelationships() -> [AnyObject] {
        defer {
            _items = []
            _profile = nil
            _tags = []
        }
        return _items + (_profile.map { [$0] } ?? []) + _tags
    }
}

extension FuzzSchemaV0.FuzzItem: FuzzGraphNode {
    func cutRelationships() -> [AnyObject] {
        defer { _owner = nil }
        return _owner.map { [$0] } ?? []
    }
}

extension FuzzSchemaV0.FuzzProfile: FuzzGraphNode {
    func cutRelationships() -> [AnyObject] {
        defer { _owner = nil }
        return _owner.map { [$0] } ?? []
    }
}

extension FuzzSchemaV0.FuzzTag: FuzzGraphNode {
    func cutRelationships() -> [AnyObject] {
        defer { _owners = [] }
        return _owners
    }
}
