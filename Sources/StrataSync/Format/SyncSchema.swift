import Foundation
import Strata

/// What sync needs to know of a schema to tell whether two devices can share
/// a zone: each entity's synced attributes (name, declared type, whether a
/// change set that lacks it can still make a model) and relationships (name,
/// target, to-one or to-many).
///
/// A zone records the description of every schema that syncs with it. Two
/// schemas are compatible when they differ only additively: an entity one
/// of them lacks, or an attribute one lacks that the other can do without
/// (optional, or with a default). The same name with another type, target
/// or kind is incompatible, as is an attribute one lacks that the other
/// requires.
///
/// The text form, one line each: `E name`, then its `A name type r|o` (r:
/// required, o: optional or defaulted) and `R name target 1|n` lines. A
/// description read from a server is untrusted: ``parse(_:)`` checks it.
package struct SyncSchema: Equatable, Sendable {
    package struct Attribute: Equatable, Sendable {
        package var type: String
        package var required: Bool
    }

    package struct Relationship: Equatable, Sendable {
        package var target: String
        package var toMany: Bool
    }

    package struct Entity: Equatable, Sendable {
        package var attributes: [String: Attribute] = [:]
        package var relationships: [String: Relationship] = [:]
    }

    package var entities: [String: Entity] = [:]

    package init(entities: [String: Entity] = [:]) { self.entities = entities }

    /// The description of `schema`'s synced properties.
    package init(_ schema: Schema) {
        for entity in schema.entities {
            var described = Entity()
            for property in entity.properties {
                if let relationship = property as? Schema.Relationship {
                    described.relationships[property.name] = Relationship(
                        target: relationship.destination, toMany: !relationship.isToOneRelationship)
                } else if property is Schema.Attribute {
                    // An `.externalStorage` value a change lacks is empty
                    // data: never required (and a zone that recorded the
                    // schema before such values synced stays compatible).
                    let required =
                        !property.isOptional && entity.defaultRecords[property.field] == nil
                        && entity.externalTrees[property.field] == nil
                    described.attributes[property.name] = Attribute(
                        type: "\(property.valueType)".replacingOccurrences(of: " ", with: ""), required: required)
                }
            }
            entities[entity.name] = described
        }
    }

    /// The text form, the same for equal descriptions.
    package var text: String {
        var lines: [String] = []
        for (name, entity) in entities.sorted(by: { $0.key < $1.key }) {
            lines.append("E \(name)")
            for (name, attribute) in entity.attributes.sorted(by: { $0.key < $1.key }) {
                lines.append("A \(name) \(attribute.type) \(attribute.required ? "r" : "o")")
            }
            for (name, relationship) in entity.relationships.sorted(by: { $0.key < $1.key }) {
                lines.append("R \(name) \(relationship.target) \(relationship.toMany ? "n" : "1")")
            }
        }
        return lines.joined(separator: "\n")
    }

    /// A digest of ``text`` (FNV-1a, 64 bits, as hexadecimal), recorded
    /// with every pushed save.
    package var hash: String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        return String(hash, radix: 16)
    }

    /// The largest description accepted from a server.
    package static let maximumText = 4 << 20

    /// The description of `text`, or a ``SyncPayloadError`` saying what is
    /// wrong with it.
    package static func parse(_ text: String) throws(SyncPayloadError) -> SyncSchema {
        guard text.utf8.count <= maximumText else {
            throw SyncPayloadError("a schema description of \(text.utf8.count) bytes (the limit is \(maximumText))")
        }
        var schema = SyncSchema()
        var current: String?
        for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: true).enumerated() {
            let words = line.split(separator: " ").map(String.init)
            func bad() -> SyncPayloadError { SyncPayloadError("schema description line \(number + 1) is not understood") }
            guard let tag = words.first, words.allSatisfy({ $0.utf8.count <= SyncChangeSet.maximumName }) else {
                throw bad()
            }
            switch tag {
            case "E" where words.count == 2:
                guard schema.entities[words[1]] == nil else { throw bad() }
                schema.entities[words[1]] = Entity()
                current = words[1]
            case "A" where words.count == 4 && (words[3] == "r" || words[3] == "o"):
                guard let entity = current, schema.entities[entity]?.attributes[words[1]] == nil else { throw bad() }
                schema.entities[entity]?.attributes[words[1]] = Attribute(type: words[2], required: words[3] == "r")
            case "R" where words.count == 4 && (words[3] == "1" || words[3] == "n"):
                guard let entity = current, schema.entities[entity]?.relationships[words[1]] == nil else { throw bad() }
                schema.entities[entity]?.relationships[words[1]] = Relationship(target: words[2], toMany: words[3] == "n")
            default:
                throw bad()
            }
        }
        return schema
    }

    /// Why this schema and `other` cannot share a zone; empty when they can.
    package func conflicts(with other: SyncSchema) -> [String] {
        var reasons: [String] = []
        func oneSided(_ mine: Entity, _ theirs: Entity, _ entity: String, _ side: String) {
            for (name, attribute) in mine.attributes.sorted(by: { $0.key < $1.key })
            where attribute.required && theirs.attributes[name] == nil {
                if theirs.relationships[name] == nil {
                    reasons.append(
                        "\(entity).\(name) is required \(side), with no default, and the other schema lacks it")
                }
            }
        }
        for (name, mine) in entities.sorted(by: { $0.key < $1.key }) {
            guard let theirs = other.entities[name] else { continue }
            for (property, attribute) in mine.attributes.sorted(by: { $0.key < $1.key }) {
                if let their = theirs.attributes[property], their.type != attribute.type {
                    reasons.append("\(name).\(property) is \(attribute.type) here and \(their.type) in the other schema")
                } else if theirs.relationships[property] != nil {
                    reasons.append("\(name).\(property) is an attribute here and a relationship in the other schema")
                }
            }
            for (property, relationship) in mine.relationships.sorted(by: { $0.key < $1.key }) {
                guard let their = theirs.relationships[property], their != relationship else { continue }
                reasons.append(
                    "\(name).\(property) is a \(relationship.toMany ? "to-many" : "to-one") of \(relationship.target) here "
                        + "and a \(their.toMany ? "to-many" : "to-one") of \(their.target) in the other schema")
            }
            oneSided(mine, theirs, name, "here")
            oneSided(theirs, mine, name, "in the other schema")
        }
        return reasons
    }
}
