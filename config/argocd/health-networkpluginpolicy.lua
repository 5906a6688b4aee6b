-- Argo CD health check for policy.game.kruise.io/NetworkPluginPolicy (resource
-- customization "policy.game.kruise.io/NetworkPluginPolicy", argocd-cm.yaml beside this
-- file). The manager writes status.observedGeneration and a Ready condition: True with
-- reason Accepted when the policy is in force, False with InvalidExpression or InvalidSpec
-- (and the error) when the webhook ignores it. Tested by hack/integrations' TestArgoCDHealth.
local hs = {}
local generation = obj.metadata.generation
if obj.status == nil or obj.status.conditions == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the network-plugin-policy manager to read the policy"
  return hs
end
if generation ~= nil and (obj.status.observedGeneration == nil or obj.status.observedGeneration < generation) then
  hs.status = "Progressing"
  hs.message = "Waiting for the manager to read generation " .. generation
  return hs
end
for _, c in ipairs(obj.status.conditions) do
  if c.type == "Ready" then
    if generation ~= nil and c.observedGeneration ~= nil and c.observedGeneration < generation then
      hs.status = "Progressing"
      hs.message = "Waiting for the manager to compile generation " .. generation
    elseif c.status == "True" then
      hs.status = "Healthy"
      hs.message = c.reason or "Accepted"
      if obj.status.warnings ~= nil and #obj.status.warnings > 0 then
        hs.message = hs.message .. " with " .. #obj.status.warnings .. " warning(s): " .. obj.status.warnings[1]
      end
    elseif c.status == "False" then
      hs.status = "Degraded"
      hs.message = (c.reason or "NotReady") .. ": " .. (c.message or "")
    else
      hs.status = "Progressing"
      hs.message = c.message or "Ready is Unknown"
    end
    return hs
  end
end
hs.status = "Progressing"
hs.message = "Waiting for the Ready condition"
return hs
