import Foundation

/// The entities of a store: one per model type, with their attributes,
/// relationships, unique constraints and indexes.
///
/// Built from model types, whose `@Model` expansion describes them
/// (`schemaMetadata`). Model types reachable through relationships are
/// included too, as SwiftData does.
public final class Schema: @unchecked Sendable {
    /// A semantic version, as `VersionedSchema.versionIdentifier` uses.
    public struct Version: Codable, Hashable, Comparable, Sendable, CustomStringConvertible {
        /// The major version number.
        public var major: Int
        /// The minor version number.
        public var minor: Int
        /// The patch version number.
        public var patch: Int

        /// The version `major.minor.patch`.
        public init(_ major: Int, _ minor: Int, _ patch: Int) {
            self.major = major
            self.minor = minor
            self.patch = patch
        }

        /// Orders versions by major, then minor, then patch number.
        public static func < (a: Version, b: Version) -> Bool {
            (a.major, a.minor, a.patch) < (b.major, b.minor, b.patch)
        }

        /// The version as `major.minor.patch`.
        public var description: String { "\(major).\(minor).\(patch)" }
    }

    /// One persisted property as `@Model` describes it.
    public struct PropertyMetadata: @unchecked Sendable {
        /// The property's name.
        public var name: String
        /// The key path of the property on its model class.
        public var keypath: AnyKeyPath
        /// The property's default value, when its declaration has one.
        public var defaultValue: Any?
        /// A ``Schema/Attribute`` or ``Schema/Relationship`` from the
        /// property's macro, or nil for a plain property.
        public var metadata: Any?

        /// Metadata for one property. Code the `@Model` macro generates makes
        /// these; not meant to be called directly.
        public init(name: String, keypath: AnyKeyPath, defaultValue: Any?, metadata: Any?) {
            self.name = name
            self.keypath = keypath
            self.defaultValue = defaultValue
            self.metadata = metadata
        }
    }

    /// The schema's version: its `VersionedSchema`'s identifier, or 1.0.0 when
    /// none was given.
    public let version: Version
    /// The entities, sorted by name.
    public let entities: [Entity]
    /// Whether any relationship declares a `minimumModelCount` or
    /// `maximumModelCount` (when none does, saves skip the count check).
    let declaresModelCounts: Bool
    /// The entities by name.
    public let entitiesByName: [String: Entity]
    let entitiesByType: [ObjectIdentifier: Entity]

    /// Whether `other` has the same entities, of the same model types, as
    /// this schema (containers may then share one open store).
    func describesSameModels(as other: Schema) -> Bool {
        entities.count == other.entities.count
            && zip(entities, other.entities).allSatisfy { $0.name == $1.name && $0.type == $1.type }
    }

    /// A schema of `types` and every model type reachable from them through
    /// relationships.
    public convenience init(_ types: [any PersistentModel.Type], version: Version = Version(1, 0, 0)) {
        self.init(types: types, version: version)
    }

    /// A schema of `types` and every model type reachable from them.
    public convenience init(_ types: any PersistentModel.Type..., version: Version = Version(1, 0, 0)) {
        self.init(types: types, version: version)
    }

    /// The schema of a version: its models, with its version identifier.
    public convenience init(versionedSchema: any VersionedSchema.Type) {
        self.init(types: versionedSchema.models, version: versionedSchema.versionIdentifier)
    }

    init(types: [any PersistentModel.Type], version: Version) {
        var byType: [ObjectIdentifier: Entity] = [:]
        var pending = types
        while let type = pending.popLast() {
            guard byType[ObjectIdentifier(type)] == nil else { continue }
            let entity = Entity(type)
            byType[ObjectIdentifier(type)] = entity
            pending.append(contentsOf: entity.relationships.compactMap(\.destinationType))
            if let superType = entity.superType { pending.append(superType) }
        }
        self.version = version
        self.entities = byType.values.sorted { $0.name < $1.name }
        for (ordinal, entity) in entities.enumerated() { entity.ordinal = ordinal }
        self.declaresModelCounts = entities.contains { entity in
            entity.relationships.contains { ($0.minimumModelCount ?? 0) > 0 || ($0.maximumModelCount ?? 0) > 0 }
        }
        Entity.linkHierarchies(entities, byType: byType)
        // Relationships without an inverse, by the entity they point at
        // (and its subentities, whose models the relationship may hold).
        for source in entities {
            for relationship in source.relationships
            where InverseGraph.inverse(of: source.type, field: relationship.field) == nil {
                guard let type = relationship.destinationType, let target = byType[ObjectIdentifier(type)] else { continue }
                for member in target.family { member.entity.incomingWithoutInverse.append((source, relationship)) }
            }
        }
        self.entitiesByType = byType
        self.entitiesByName = Dictionary(entities.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
    }

    /// The entity of a model type, if this schema holds it.
    public func entity<T: PersistentModel>(for type: T.Type) -> Entity? { entitiesByType[ObjectIdentifier(type)] }

    package func entity(forType type: any PersistentModel.Type) -> Entity? { entitiesByType[ObjectIdentifier(type)] }

    /// The entity named `name` (the model class's name), if any.
    public func entity(named name: String) -> Entity? { entitiesByName[name] }
}

/// Implemented by `Optional` so that schema code can see through it.
public protocol _OptionalMarker {
    /// The type the optional wraps. For Strata's schema code; not meant to be
    /// called directly.
    static var _wrappedType: Any.Type { get }
}

extension Optional: _OptionalMarker {
    /// `Wrapped`. For Strata's schema code; not meant to be called directly.
    public static var _wrappedType: Any.Type { Wrapped.self }
}

/// Implemented by `Array` so that schema code can find to-many relationships.
public protocol _ArrayMarker {
    /// The array's element type. For Strata's schema code; not meant to be
    /// called directly.
    static var _elementType: Any.Type { get }
}

extension Array: _ArrayMarker {
    /// `Element`. For Strata's schema code; not meant to be called directly.
    public static var _elementType: Any.Type { Element.self }
}

/// Implemented by writable key paths only: a persisted `let` has a
/// read-only one.
protocol _WritableKeyPathMarker {}

extension ReferenceWritableKeyPath: _WritableKeyPathMarker {}
