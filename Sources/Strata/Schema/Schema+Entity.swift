import Foundation

extension Schema {
    /// One model type: its name, properties and constraints.
    public final class Entity: Hashable, @unchecked Sendable, CustomStringConvertible {
        /// The model class's name; also the entity's name in the store.
        public let name: String
        package let type: any PersistentModel.Type
        /// The entity's position in its schema's ``Schema/entities``.
        @exclusivity(unchecked) var ordinal = 0
        /// Every persisted property, attributes and relationships, in
        /// declaration order (a property's position is its field number).
        public let properties: [Property]
        /// The attributes among `properties`, in declaration order.
        public let attributes: [Attribute]
        /// The relationships among `properties`, in declaration order.
        public let relationships: [Relationship]
        /// Whether a relationship is a non-optional to-one, whose target
        /// is loaded with the model.
        let hasRequiredToOne: Bool
        /// Attributes a custom migration stage added without a default:
        /// while its `didMigrate` runs they read as their type's
        /// placeholder. Set only on a stage's own schema, before the stage
        /// reads through it.
        nonisolated(unsafe) var placeholderFields: Set<Int> = []
        /// Groups of property names that are unique together
        /// (`#Unique` and `@Attribute(.unique)`).
        public let uniquenessConstraints: [[String]]
        /// Groups of property names with a B-tree index (`#Index`).
        public let indices: [[String]]

        /// The attributes by name.
        public var attributesByName: [String: Attribute] {
            Dictionary(attributes.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        }
        /// The relationships by name.
        public var relationshipsByName: [String: Relationship] {
            Dictionary(relationships.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        }
        /// Every property by name.
        public var propertiesByName: [String: Property] {
            Dictionary(properties.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        }
        /// The properties the store keeps: every property but `.ephemeral`
        /// attributes, in declaration order.
        public var storedProperties: [Property] {
            properties.filter { !(($0 as? Attribute)?.options.contains(.ephemeral) ?? false) }
        }
        /// ``storedProperties`` by name.
        public var storedPropertiesByName: [String: Property] {
            Dictionary(storedProperties.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        }
        /// The entity this one inherits from: the entity of the model
        /// class's superclass, when that is a model too (`@Model class
        /// BusinessTrip: Trip`); nil otherwise.
        public internal(set) weak var superentity: Entity?
        /// The name of ``superentity``.
        public var superentityName: String? { superentity?.name }
        /// The entities whose model classes subclass this one's directly.
        @exclusivity(unchecked) public internal(set) var subentities: Set<Entity> = []
        /// The properties inherited from ``superentity``: the first
        /// ones of ``properties``, with the same field numbers as there.
        public var inheritedProperties: [Property] { Array(properties.prefix(inheritedCount)) }
        /// ``inheritedProperties`` by name.
        public var inheritedPropertiesByName: [String: Property] {
            Dictionary(inheritedProperties.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        }
        /// How many of ``properties`` the model class inherits.
        let inheritedCount: Int
        /// The superclass's model type, when the class subclasses a model.
        let superType: (any PersistentModel.Type)?

        /// The entity and its descendants, this one first: the entities
        /// whose rows a fetch of this one returns. Set with the schema.
        @exclusivity(unchecked) private(set) var family: [Unowned] = []
        /// True when some model class subclasses this one's.
        @exclusivity(unchecked) private(set) var hasSubentities = false
        /// The tag in the high bits of the entity's row ids (see
        /// ``rowTagShift``): 0 for an entity at the top of its hierarchy,
        /// a number from 1 to 32,767 made from the name for a subentity.
        @exclusivity(unchecked) private(set) var rowTag: Int64 = 0
        /// The entities of the whole hierarchy by row tag, when the entity
        /// is part of one (empty otherwise).
        @exclusivity(unchecked) private(set) var hierarchyByTag: [Int64: Unowned] = [:]
        /// Each property's key path, by the key path's of the class that
        /// declares it too (`\Trip.name` and `\BusinessTrip.name`).
        let fieldsByKeyPath: [AnyKeyPath: Int]

        /// Row ids of a subentity carry its tag above this bit, so that a
        /// row id alone names its entity: a relationship to `Trip` that
        /// holds a `BusinessTrip` stores only the row.
        static let rowTagShift: Int64 = 48
        /// The largest row id an entity of a hierarchy allocates.
        var lastRowID: Int64 {
            hierarchyByTag.isEmpty ? .max : (rowTag << Self.rowTagShift) | ((1 << Self.rowTagShift) - 1)
        }
        /// The row id before an entity's first.
        var rowBase: Int64 { rowTag << Self.rowTagShift }

        /// The entity of `row`: this one, or the subentity whose tag the
        /// row carries; nil when the row belongs to no entity of this
        /// hierarchy that is this one or below it.
        @inline(__always) func concrete(_ row: Int64) -> Entity? {
            guard hasSubentities || rowTag != 0 else { return self }
            let entity = hierarchyByTag[row >> Self.rowTagShift]?.entity
            return entity.flatMap { $0.isKind(of: self) ? $0 : nil }
        }

        /// The entity of `row` anywhere in this entity's hierarchy.
        func hierarchyEntity(ofRow row: Int64) -> Entity? {
            hierarchyByTag.isEmpty ? self : hierarchyByTag[row >> Self.rowTagShift]?.entity
        }

        /// ``concrete(_:)``, or this entity when the row names none.
        @inline(__always) func concreteOrSelf(_ row: Int64) -> Entity { concrete(row) ?? self }

        /// True when this entity is `other` or descends from it.
        func isKind(of other: Entity) -> Bool {
            var current: Entity? = self
            while let entity = current {
                if entity === other { return true }
                current = entity.superentity
            }
            return false
        }

        /// The stored property of `keyPath` (rooted at this entity's model
        /// class or at the class that declares the property).
        func property(at keyPath: AnyKeyPath) -> Property? {
            if let field = fieldsByKeyPath[keyPath] { return properties[field] }
            return nil
        }

        /// The attribute of `keyPath`, as ``property(at:)``.
        func attribute(at keyPath: AnyKeyPath) -> Attribute? { property(at: keyPath) as? Attribute }

        /// The relationship of `keyPath`, as ``property(at:)``.
        func relationship(at keyPath: AnyKeyPath) -> Relationship? { property(at: keyPath) as? Relationship }

        /// An unowned reference: entities refer to one another in their
        /// schema, which holds them all.
        struct Unowned {
            unowned(unsafe) let entity: Entity
        }

        /// Two entities are equal when they are the same object.
        public static func == (a: Entity, b: Entity) -> Bool { a === b }
        /// Hashes the object's identity.
        public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }

        init(_ type: any PersistentModel.Type) {
            self.type = type
            self.name = type._strataEntityName
            let superType = _getSuperclass(type) as? any PersistentModel.Type
            self.superType = superType
            self.inheritedCount = superType?.schemaMetadata.count ?? 0
            let (properties, declaredNames) = Self.properties(of: type)
            var names = declaredNames
            self.properties = properties
            self.fieldsByKeyPath = Self.keyPathFields(properties, superType: superType, names: &names)
            self.attributes = properties.compactMap { $0 as? Attribute }
            self.relationships = properties.compactMap { $0 as? Relationship }
            self.hasRequiredToOne = relationships.contains { $0.isToOneRelationship && !$0.isOptional }
            let (declaredUnique, declaredIndexes) = Self.declaredGroups(of: type, names: names)
            self.uniquenessConstraints =
                properties.compactMap { ($0 as? Attribute)?.isUnique == true ? [$0.name] : nil } + declaredUnique
            self.indices = declaredIndexes
            var problems: [String]
            (self.keyGroups, problems) = KeyGroup.groups(
                entity: name, properties: properties, unique: uniquenessConstraints, indices: indices)
            self.uniqueGroups = keyGroups.filter { $0.kind == .unique }
            let external = Self.externalTrees(entity: name, properties: properties, problems: &problems)
            self.externalTrees = external
            self.fieldsInRecord = _FieldSet(
                properties.indices.filter { field in
                    (properties[field] as? Relationship)?.isToOneRelationship ?? (external[field] == nil)
                })
            let keyed = keyGroups
            self.patchBlockingFields = _FieldSet(
                properties.indices.filter { field in
                    !(properties[field] is Attribute) || external[field] != nil
                        || keyed.contains { $0.fields.contains(field) }
                })
            self.defaultRecords = Self.defaultRecords(of: attributes, external: external)
            self.preservedFields = Set(
                attributes.filter { $0.options.contains(.preserveValueOnDeletion) }.map(\.field))
            self.recordTree = Store.treeName(entityName: name)
            self.problems = problems
            self.declaringEntityNames = Self.declaringEntityNames(name, superType: superType, count: properties.count)
            self.inverseSides = InverseGraph.info(type).inverses
            self.relationshipStorage = [:]
            self.relationshipStorage = RelationshipStorage.plan(for: self)
        }

        /// The properties `type` declares and inherits, in field order,
        /// with the name of each key path.
        private static func properties(of type: any PersistentModel.Type) -> ([Property], [AnyKeyPath: String]) {
            var properties: [Property] = []
            var names: [AnyKeyPath: String] = [:]
            for (field, metadata) in type.schemaMetadata.enumerated() {
                names[metadata.keypath] = metadata.name
                let valueType = Swift.type(of: metadata.keypath).valueType
                let property: Property
                if let (destination, toOne) = Relationship.destination(of: valueType) {
                    let relationship = metadata.metadata as? Relationship ?? Relationship()
                    relationship.destinationType = destination
                    relationship.isToOneRelationship = toOne
                    property = relationship
                } else {
                    property = metadata.metadata as? Attribute ?? Attribute()
                }
                property.bind(metadata, field: field, valueType: valueType)
                properties.append(property)
            }
            return (properties, names)
        }

        /// The field of every key path that names a property: key paths of
        /// the classes that declare inherited properties name the same
        /// fields (a predicate over `Trip` is run on a `BusinessTrip`'s
        /// records). Their names join `names`.
        private static func keyPathFields(
            _ properties: [Property], superType: (any PersistentModel.Type)?, names: inout [AnyKeyPath: String]
        ) -> [AnyKeyPath: Int] {
            var keyPathFields: [AnyKeyPath: Int] = [:]
            var ancestor = superType
            while let type = ancestor {
                for (field, metadata) in type.schemaMetadata.enumerated() {
                    names[metadata.keypath] = metadata.name
                    keyPathFields[metadata.keypath] = field
                }
                ancestor = _getSuperclass(type) as? any PersistentModel.Type
            }
            for property in properties { keyPathFields[property.keypath] = property.field }
            return keyPathFields
        }

        /// The `#Unique` and `#Index` groups of `type`'s class, then its
        /// superclasses' (each class's `_strataUniqueness` lists only the
        /// groups it declares), as property names.
        private static func declaredGroups(
            of type: any PersistentModel.Type, names: [AnyKeyPath: String]
        ) -> (unique: [[String]], indexes: [[String]]) {
            let resolve: ([[AnyKeyPath]]) -> [[String]] = { groups in
                groups.map { group in group.map { names[$0] ?? "\($0)" } }
            }
            var declaredUnique: [[String]] = []
            var declaredIndexes: [[String]] = []
            var declaring: (any PersistentModel.Type)? = type
            while let type = declaring {
                declaredUnique = resolve(type._strataUniqueness) + declaredUnique
                declaredIndexes = resolve(type._strataIndexes) + declaredIndexes
                declaring = _getSuperclass(type) as? any PersistentModel.Type
            }
            return (declaredUnique, declaredIndexes)
        }

        /// The tree of each `.externalStorage` attribute, by field; a
        /// misuse (not `Data`, or a `let`, and a relationship declared
        /// `let`) joins `problems`.
        private static func externalTrees(entity name: String, properties: [Property], problems: inout [String])
            -> [Int: String]
        {
            var external: [Int: String] = [:]
            for case let attribute as Attribute in properties where attribute.options.contains(.externalStorage) {
                if attribute.valueType == Data.self || attribute.valueType == Data?.self {
                    external[attribute.field] = TreeName.external(entity: name, attribute: attribute.name)
                } else {
                    problems.append("\(name).\(attribute.name): .externalStorage applies to Data attributes only")
                }
            }
            // A `let` is read once, when the model is made: a relationship
            // or external data, which load later, cannot be one.
            for property in properties where !(property.keypath is any _WritableKeyPathMarker) {
                if property is Relationship {
                    problems.append("\(name).\(property.name): a relationship must be declared 'var', not 'let'")
                } else if external[property.field] != nil {
                    problems.append("\(name).\(property.name): an .externalStorage attribute must be declared 'var'")
                }
            }
            return external
        }

        /// The encoded field of each non-optional attribute's default value
        /// (what a record stored before the attribute existed reads).
        private static func defaultRecords(of attributes: [Attribute], external: [Int: String]) -> [Int: [UInt8]] {
            var defaults: [Int: [UInt8]] = [:]
            for attribute in attributes where !attribute.isOptional && external[attribute.field] == nil {
                var writer = _RecordWriter()
                if let value = attribute.defaultValue, writer.encodeAny(value, field: attribute.field) {
                    defaults[attribute.field] = writer.bytes
                }
            }
            return defaults
        }

        /// The entity that declares each field: a superclass's for the
        /// fields it declares, `name` for the rest.
        private static func declaringEntityNames(_ name: String, superType: (any PersistentModel.Type)?, count: Int)
            -> [String]
        {
            var owners = Array(repeating: name, count: count)
            var owner = superType
            while let type = owner {
                let declared = min(type.schemaMetadata.count, owners.count)
                for field in 0..<declared { owners[field] = type._strataEntityName }
                owner = _getSuperclass(type) as? any PersistentModel.Type
            }
            return owners
        }

        /// Relationships of any entity that point at this one and have no
        /// inverse (delete rules clear them through storage).
        @exclusivity(unchecked) var incomingWithoutInverse: [(source: Entity, relationship: Relationship)] = []

        /// The inverse of each relationship that has one, by field (see
        /// `InverseGraph`), kept here so hot paths need no lookup.
        let inverseSides: [Int: InverseGraph.Side]

        /// The tree of the entity's records (`e.<name>`).
        package let recordTree: String

        /// The trees of `.externalStorage` attributes, by field.
        package let externalTrees: [Int: String]

        /// The fields whose properties keep their values in the record:
        /// attributes not in external storage, and to-ones.
        let fieldsInRecord: _FieldSet

        /// The fields whose change a save cannot patch into the stored
        /// record alone: relationships, `.externalStorage` attributes and
        /// the fields of unique constraints and indexes (their entries
        /// elsewhere change with them).
        let patchBlockingFields: _FieldSet

        /// Whether the property of `field` keeps its value in the record:
        /// an attribute not in external storage, or a to-one.
        @inline(__always) func holdsInRecord(_ field: Int) -> Bool { fieldsInRecord.contains(field) }

        /// A one-field record (format byte, tag, payload) holding the
        /// declared default value of each non-optional attribute kept in
        /// the record, by field. A record without the field, or with nil
        /// in it, reads as this value: a migration that adds such an
        /// attribute, or makes an optional one non-optional, records the
        /// default in the catalog instead of rewriting every record (see
        /// `LightweightMigration`).
        package let defaultRecords: [Int: [UInt8]]

        /// Fields of `.preserveValueOnDeletion` attributes (their values go
        /// into history tombstones).
        let preservedFields: Set<Int>

        /// Where each relationship lives, by field.
        @exclusivity(unchecked) package private(set) var relationshipStorage: [Int: RelationshipStorage]
        /// The trees of this entity's relationships (reverse indexes, joins).
        /// An inherited relationship's trees are its superentity's, listed
        /// there only.
        var relationshipTrees: [String] {
            relationshipStorage.filter { $0.key >= inheritedCount }.values.flatMap(\.ownedTrees).sorted()
        }

        /// The entity's unique constraints, then its indexes, each with
        /// its tree.
        let keyGroups: [KeyGroup]
        /// The unique constraints of ``keyGroups``, found once: saves ask
        /// for them per model.
        package let uniqueGroups: [KeyGroup]
        /// What is wrong with the declaration (an index on an unknown or
        /// unkeyable property, a hierarchy whose classes disagree); the
        /// container refuses such a schema.
        @exclusivity(unchecked) private(set) var problems: [String]

        /// The name of the entity that declares each property, by field:
        /// this one's, or an ancestor's for an inherited property. An
        /// inherited relationship keeps its trees under that name, so
        /// that the rows of the whole hierarchy share them.
        let declaringEntityNames: [String]

        /// The trees of the same unique constraint in the other entities
        /// of the hierarchy, by this entity's tree: a value is unique
        /// across the hierarchy, as SwiftData keeps it in one table.
        @exclusivity(unchecked) private(set) var uniqueSiblings: [String: [String]] = [:]

        /// Links the entities of `schema` into hierarchies: superentities,
        /// subentities, row tags and the unique constraints they share.
        /// Reports a hierarchy that cannot be stored as a problem of the
        /// entity at fault.
        static func linkHierarchies(_ entities: [Entity], byType: [ObjectIdentifier: Entity]) {
            for entity in entities {
                guard let superType = entity.superType, let parent = byType[ObjectIdentifier(superType)] else { continue }
                entity.superentity = parent
                parent.subentities.insert(entity)
            }
            for root in entities where root.superentity == nil && !root.subentities.isEmpty {
                var members: [Entity] = []
                var pending = [root]
                while let entity = pending.popLast() {
                    members.append(entity)
                    pending += entity.subentities.sorted { $0.name < $1.name }
                }
                var byTag: [Int64: Unowned] = [0: Unowned(entity: root)]
                for entity in members where entity !== root {
                    let tag = rowTag(of: entity.name)
                    if let other = byTag[tag]?.entity {
                        entity.problems.append(
                            "\(entity.name) and \(other.name), in \(root.name)'s hierarchy, have the same row tag (\(tag)); "
                                + "rename one of the two classes")
                    }
                    entity.rowTag = tag
                    byTag[tag] = Unowned(entity: entity)
                }
                for entity in members {
                    entity.hierarchyByTag = byTag
                    entity.hasSubentities = !entity.subentities.isEmpty
                }
                for entity in members { entity.family = members.filter { $0.isKind(of: entity) }.map(Unowned.init) }
                linkUniqueConstraints(members)
            }
            for entity in entities where entity.family.isEmpty { entity.family = [Unowned(entity: entity)] }
        }

        /// A subentity's own unique constraints must not cover an inherited
        /// property that its superentity's constraints leave free (the two
        /// classes would disagree on what is unique); the constraints they
        /// share are checked in every class's tree.
        private static func linkUniqueConstraints(_ members: [Entity]) {
            for entity in members {
                guard let parent = entity.superentity else { continue }
                let inherited = Set(parent.uniqueGroups.map { $0.properties.map(\.name) })
                for group in entity.uniqueGroups where !inherited.contains(group.properties.map(\.name)) {
                    let borrowed = group.properties.filter { $0.field < entity.inheritedCount }
                    guard !borrowed.isEmpty else { continue }
                    entity.problems.append(
                        "\(entity.name) declares a unique constraint on (\(group.properties.map(\.name).joined(separator: ", "))) "
                            + "that \(parent.name) does not: \(borrowed.map(\.name).joined(separator: ", ")) "
                            + "\(borrowed.count == 1 ? "is" : "are") inherited from \(parent.name), and a unique value "
                            + "is unique across the whole hierarchy; declare the constraint on \(parent.name)")
                }
            }
            for entity in members {
                for group in entity.uniqueGroups {
                    let names = group.properties.map(\.name)
                    let others = members.filter { $0 !== entity }.compactMap { other in
                        other.uniqueGroups.first { $0.properties.map(\.name) == names }?.treeName
                    }
                    if !others.isEmpty { entity.uniqueSiblings[group.treeName] = others }
                }
            }
        }

        /// A subentity's row tag: FNV-1a of its name, folded to 1...32,767.
        /// Made from the name alone, so every process and every store
        /// agrees on it without recording it.
        static func rowTag(of name: String) -> Int64 {
            var hash: UInt64 = 0xcbf2_9ce4_8422_2325
            for byte in name.utf8 {
                hash ^= UInt64(byte)
                hash &*= 0x100_0000_01b3
            }
            return Int64(hash % 32_767) + 1
        }

        /// The entity as `Entity(<name>)`.
        public var description: String { "Entity(\(name))" }
    }
}
