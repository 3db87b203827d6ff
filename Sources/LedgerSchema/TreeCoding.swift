import Foundation
import HealthModel

extension SignedTreeHead {
    package init(_ message: Healthledger_V1_SignedTreeHead) {
        self.init(
            ledgerID: message.ledgerID, size: message.treeSize, rootHash: Array(message.rootHash), timestampUs: message.timestampUs,
            signature: Array(message.signature), publicKey: Array(message.publicKey))
    }
}

extension Healthledger_V1_SignedTreeHead {
    package init(_ head: SignedTreeHead) {
        self.init()
        ledgerID = head.ledgerID
        treeSize = head.size
        rootHash = Data(head.rootHash)
        timestampUs = head.timestampUs
        signature = Data(head.signature)
        publicKey = Data(head.publicKey)
    }
}

extension InclusionProof {
    package init(_ message: Healthledger_V1_InclusionProof) {
        self.init(sequence: message.sequence, treeSize: message.treeSize, eventHash: Array(message.eventHash), path: message.path.map { Array($0) })
    }
}

extension Healthledger_V1_InclusionProof {
    package init(_ proof: InclusionProof) {
        self.init()
        sequence = proof.sequence
        treeSize = proof.treeSize
        eventHash = Data(proof.eventHash)
        path = proof.path.map { Data($0) }
    }
}

extension ConsistencyProof {
    package init(_ message: Healthledger_V1_ConsistencyProof) {
        self.init(firstSize: message.firstSize, secondSize: message.secondSize, path: message.path.map { Array($0) })
    }
}

extension Healthledger_V1_ConsistencyProof {
    package init(_ proof: ConsistencyProof) {
        self.init()
        firstSize = proof.firstSize
        secondSize = proof.secondSize
        path = proof.path.map { Data($0) }
    }
}
